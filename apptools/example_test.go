package apptools_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/toolgate/toolgate/apptools"
)

// A component named "bookmarks" in toolgate's configuration verifies the
// token on each tool endpoint against toolgate's published keys. The key
// set is fetched on the first call with a token, so the component may start
// before toolgate. A request without a token, as below, is refused without
// fetching anything.
func ExampleVerifier_Middleware() {
	v := apptools.NewVerifier("http://127.0.0.1:8080/toolgate/.well-known/jwks.json", "toolgate", "bookmarks")

	mux := http.NewServeMux()
	mux.Handle("GET /whoami", v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := apptools.FromContext(r.Context())
		where := "through the Tools API"
		if tc, err := apptools.ToolContext(r); err == nil && tc.IsThread() {
			where = "in thread " + tc.ThreadID
		}
		apptools.WriteText(w, http.StatusOK, fmt.Sprintf("%s at %s, %s", id.User, id.Install, where))
	})))
	// A url target's endpoint gets no token: leave it unwrapped.
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, r *http.Request) {
		apptools.WriteText(w, http.StatusOK, "pong")
	})

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/whoami", nil))
	fmt.Println(rec.Code, rec.Header().Get("WWW-Authenticate"))
	fmt.Print(rec.Body)
	// Output:
	// 401 Bearer
	// {"code":"unauthorized","error":"no bearer token in the Authorization header"}
}
