// Command bookmarks is a small app component for the toolgate quick start.
// It keeps bookmarks in memory and answers tool calls in each of the result
// channels a handler may use: plain text, content + markdown, content +
// embedUrl (a card page that resizes as it grows), domain errors, and
// action-required cards that pause the call until the user confirms
// (clear_bookmarks) or until one device answers (open_on_device).
// share_bookmark takes a nested input. Under /oauth/ it is also a demo
// sign-in service (oauth.go), the quick start's connection. Beside the standard library it
// uses only toolgate's apptools package, which verifies the identity token
// toolgate signs for each call, so it shows what any HTTP server has to do
// to sit behind toolgate.
//
//	go run ./examples/bookmarks -addr 127.0.0.1:9001 -public http://127.0.0.1:8080/app \
//		-jwks http://127.0.0.1:8080/toolgate/.well-known/jwks.json -issuer toolgate -audience bookmarks
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/apptools"
)

// maxBody bounds what a request body may hold; a bookmark is small.
const maxBody = 64 << 10

func main() {
	addr := flag.String("addr", "127.0.0.1:9001", "address to listen on")
	public := flag.String("public", "http://127.0.0.1:8080/app",
		"absolute base URL where this component's pages are reachable from the browser (for embedUrl)")
	jwks := flag.String("jwks", "http://127.0.0.1:8080/toolgate/.well-known/jwks.json",
		"URL of toolgate's JWKS, the keys that verify its identity tokens")
	issuer := flag.String("issuer", apptools.DefaultIssuer, "iss of toolgate's identity tokens")
	audience := flag.String("audience", "bookmarks",
		"this component's name in toolgate's configuration: the aud of the tokens meant for it")
	toolgateURL := flag.String("toolgate", "http://127.0.0.1:8080/toolgate",
		"toolgate's base URL as the browser reaches it, for the example page and the demo sign-in service's one redirect URI (<toolgate>/connections/demo/callback)")
	pageSecret := flag.String("page-secret", envOr("TOOLGATE_PAGE_SECRET", devPageSecret),
		"secret shared with toolgate's pages block, to mint page tokens (default: $TOOLGATE_PAGE_SECRET, else a development secret)")
	pageUser := flag.String("page-user", "u_1", "the demo user that opening the example page signs in (the example has no login)")
	pageInstall := flag.String("page-install", "in_1", "the demo user's installation; its page sees only that installation's client tool calls")
	flag.Parse()

	if !absoluteHTTP(*public) {
		log.Fatalf("-public %q must be an absolute http(s) URL", *public)
	}
	if !absoluteHTTP(*jwks) {
		log.Fatalf("-jwks %q must be an absolute http(s) URL", *jwks)
	}
	if *issuer == "" || *audience == "" {
		log.Fatal("-issuer and -audience must not be empty")
	}
	if !absoluteHTTP(*toolgateURL) || len(*pageSecret) < 32 {
		log.Fatal("-toolgate must be an absolute http(s) URL and -page-secret at least 32 bytes")
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	verifier := apptools.NewVerifier(*jwks, *issuer, *audience)
	if err := verifier.Err(); err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		// The key set is fetched on the first call, not now: toolgate
		// usually starts after its components.
		Handler: logRequests(newApp(*public, *audience, verifier).
			withPage(pageConfig{toolgate: strings.TrimSuffix(*toolgateURL, "/"), secret: []byte(*pageSecret), user: *pageUser, install: *pageInstall}).
			withOAuth(newDemoOAuth(strings.TrimSuffix(*toolgateURL, "/") + "/connections/demo/callback")).routes()),
		ReadHeaderTimeout: 10 * time.Second,
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			log.Printf("shutdown: %v", err)
		}
	}()

	log.Printf("bookmarks listening on http://%s (pages at %s); tool calls need a token from %s for aud %q",
		ln.Addr(), *public, *issuer, *audience)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	log.Printf("bookmarks stopped")
}

// devPageSecret signs the example's page tokens when no secret is given.
// It is public: use it on loopback only, as the quick start does.
const devPageSecret = "toolgate-example-page-secret-not-for-production"

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// bookmark is one saved link.
type bookmark struct {
	ID    string   `json:"id"`
	URL   string   `json:"url"`
	Title string   `json:"title"`
	Tags  []string `json:"tags,omitempty"`
	seq   int
	saved time.Time // shown in the card's details
}

// absoluteHTTP reports whether s is an absolute http(s) URL.
func absoluteHTTP(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// owner is whose bookmarks they are: the user and installation of the
// identity token toolgate signed for the call, never a value of the input.
type owner struct{ user, install string }

// shelf is one owner's bookmarks; ids count per owner.
type shelf struct {
	next  int
	items map[string]*bookmark
}

// app holds the bookmarks. Nothing is persisted: a restart forgets them.
type app struct {
	public    string // base URL of the pages, no trailing slash
	component string // this component's name in toolgate's configuration
	verify    *apptools.Verifier
	// cardKey signs the card URLs handed out as embedUrl: the browser
	// loads them without a token, so the URL itself names whose bookmark
	// it shows, and only this process can write one.
	cardKey []byte

	page  *pageConfig // the example page, when set
	oauth *demoOAuth  // the demo sign-in service, when set

	mu      sync.Mutex
	shelves map[owner]*shelf
}

// withPage serves the example page too.
func (a *app) withPage(pc pageConfig) *app {
	a.page = &pc
	return a
}

// withOAuth serves the demo sign-in service too, under /oauth/.
func (a *app) withOAuth(o *demoOAuth) *app {
	a.oauth = o
	return a
}

func newApp(public, component string, verify *apptools.Verifier) *app {
	return &app{public: strings.TrimSuffix(public, "/"), component: component, verify: verify,
		cardKey: randomKey(), shelves: map[owner]*shelf{}}
}

// randomKey returns a fresh 256-bit key. The keys live as long as the
// process, like the bookmarks they protect.
func randomKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read does not return an error since Go 1.24
	return k
}

// ownerOf returns the verified caller of a tool route.
func ownerOf(w http.ResponseWriter, r *http.Request) (owner, bool) {
	id, ok := apptools.FromContext(r.Context())
	if !ok {
		// Only reachable if the route lost its middleware.
		apptools.WriteError(w, http.StatusInternalServerError, "internal", "no verified identity")
		return owner{}, false
	}
	return owner{user: id.User, install: id.Install}, true
}

// shelf returns o's bookmarks, made on first use. a.mu must be held.
func (a *app) shelf(o owner) *shelf {
	s, ok := a.shelves[o]
	if !ok {
		s = &shelf{items: map[string]*bookmark{}}
		a.shelves[o] = s
	}
	return s
}

func (a *app) routes() http.Handler {
	mux := http.NewServeMux()
	// The tools toolgate calls through app targets: each call carries an
	// identity token, and one that does not verify never reaches a handler.
	tool := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, a.verify.Middleware(h)) }
	tool("POST /bookmarks", a.save)
	tool("GET /bookmarks", a.list)
	tool("GET /bookmarks/{id}", a.show)
	tool("DELETE /bookmarks/{id}", a.delete)
	tool("POST /bookmarks/{id}/share", a.share)
	tool("POST /bookmarks/{id}/open", a.askOpen)
	tool("POST /bookmarks/clear", a.askClear)
	// Not a tool of its own: the target of the clear card's "delete"
	// button, which toolgate runs with the call's identity and thread.
	tool("POST /bookmarks/clear/confirm", a.clearAll)
	tool("GET /whoami", whoami)

	// The card page is loaded by the browser in the tool card's iframe,
	// which sends no token: its URL carries a capability this component
	// signed (see cardURL), so knowing an id is not enough.
	mux.HandleFunc("GET /bookmarks/{id}/card", a.card)
	if a.page != nil {
		a.pageRoutes(mux, *a.page)
	}
	if a.oauth != nil {
		a.oauth.routes(mux)
	}
	// Called by the quick start's url target, which gets no token.
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, r *http.Request) {
		apptools.WriteText(w, http.StatusOK, "pong")
	})
	return mux
}

type saveRequest struct {
	URL   string   `json:"url"`
	Title string   `json:"title"`
	Tags  []string `json:"tags"`
}

// decodeBody reads a request's JSON body into v strictly: within maxBody,
// and no member v has no field for, which it names.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	err := json.UnmarshalRead(http.MaxBytesReader(w, r.Body, maxBody), v, json.RejectUnknownMembers(true))
	var se *json.SemanticError
	if errors.Is(err, json.ErrUnknownName) && errors.As(err, &se) {
		return fmt.Errorf("unknown field %q", se.JSONPointer.LastToken())
	}
	return err
}

func (a *app) save(w http.ResponseWriter, r *http.Request) {
	var in saveRequest
	if err := decodeBody(w, r, &in); err != nil {
		apptools.WriteError(w, http.StatusBadRequest, "invalid", "the body must be a JSON object {url, title, tags?}: "+err.Error())
		return
	}
	// toolgate has already checked the input against the tool's schema;
	// this is the component's own, lighter check for callers that skip it.
	in.Title = strings.TrimSpace(in.Title)
	switch u, err := url.Parse(in.URL); {
	case in.URL == "":
		apptools.WriteError(w, http.StatusBadRequest, "invalid", "url is required")
		return
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		apptools.WriteError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("url %q must be an absolute http(s) URL", in.URL))
		return
	case in.Title == "":
		apptools.WriteError(w, http.StatusBadRequest, "invalid", "title is required")
		return
	}

	o, ok := ownerOf(w, r)
	if !ok {
		return
	}
	a.mu.Lock()
	sh := a.shelf(o)
	sh.next++
	b := &bookmark{ID: "b" + strconv.Itoa(sh.next), URL: in.URL, Title: in.Title, Tags: in.Tags, seq: sh.next, saved: time.Now().UTC()}
	sh.items[b.ID] = b
	a.mu.Unlock()

	apptools.WriteResult(w, http.StatusCreated, apptools.Result{
		Content:  fmt.Sprintf("Saved bookmark %s: %s (%s)", b.ID, b.Title, b.URL),
		Markdown: "Saved **" + markdownLink(b.Title, b.URL) + "**",
	})
}

// markdownLink writes [title](url) so that neither part can form markup
// of its own: the title's markdown metacharacters are escaped, so it
// cannot open an image (which the card would fetch, leaking whatever its
// URL holds), a link, or HTML, and line breaks become spaces so it cannot
// start a block. Only an http(s) URL becomes a link, with the characters
// that could end it percent-encoded; any other is left out.
func markdownLink(title, rawURL string) string {
	text := markdownText(title)
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return text
	}
	return "[" + text + "](" + linkEscaper.Replace(u.String()) + ")"
}

// markdownText is s as markdown text that shows s and nothing else, as
// markdownLink's title: metacharacters escaped, line breaks made spaces.
func markdownText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case strings.ContainsRune("\\`*_[]()<>!", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		case isBreakOrControl(r):
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// linkEscaper percent-encodes what could end a markdown link destination
// or escape from it; url.URL.String already encoded spaces and controls.
var linkEscaper = strings.NewReplacer("(", "%28", ")", "%29", "<", "%3C", ">", "%3E", "\\", "%5C", "`", "%60", "\"", "%22", "'", "%27", " ", "%20")

// list answers in plain text: the simplest channel, the body is the content.
func (a *app) list(w http.ResponseWriter, r *http.Request) {
	o, ok := ownerOf(w, r)
	if !ok {
		return
	}
	tag := r.URL.Query().Get("tag")
	found := slices.DeleteFunc(a.sorted(o), func(b bookmark) bool {
		return tag != "" && !slices.Contains(b.Tags, tag)
	})
	if len(found) == 0 {
		apptools.WriteText(w, http.StatusOK, "No bookmarks.")
		return
	}
	var sb strings.Builder
	for _, b := range found {
		fmt.Fprintf(&sb, "%s %s %s\n", b.ID, b.Title, b.URL)
	}
	apptools.WriteText(w, http.StatusOK, sb.String())
}

func (a *app) show(w http.ResponseWriter, r *http.Request) {
	o, ok := ownerOf(w, r)
	if !ok {
		return
	}
	b, ok := a.lookup(w, r, o)
	if !ok {
		return
	}
	content := fmt.Sprintf("%s: %s (%s)", b.ID, b.Title, b.URL)
	if len(b.Tags) > 0 {
		content += ", tags: " + strings.Join(b.Tags, ", ")
	}
	apptools.WriteResult(w, http.StatusOK, apptools.Result{
		Content:  content,
		EmbedURL: a.cardURL(o, b.ID),
	})
}

// cardURL is the address of b's card page for o: the bookmark's path and
// a token naming o and the bookmark, signed with the process's card key.
// It does not expire, so a card scrolled back to still shows; it is no
// good after a restart, when the bookmarks are gone too.
func (a *app) cardURL(o owner, id string) string {
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"aud": "bookmarks-card", "sub": o.user, "install": o.install, "bookmark": id,
	}).SignedString(a.cardKey)
	if err != nil {
		// HS256 with a 32-byte key does not fail.
		panic(err)
	}
	return a.public + "/bookmarks/" + url.PathEscape(id) + "/card?t=" + url.QueryEscape(tok)
}

// cardOwner reads the owner from a card URL's token, which must name the
// bookmark of the path.
func (a *app) cardOwner(r *http.Request) (owner, bool) {
	var c struct {
		jwt.RegisteredClaims
		Install  string `json:"install"`
		Bookmark string `json:"bookmark"`
	}
	_, err := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithAudience("bookmarks-card")).
		ParseWithClaims(r.URL.Query().Get("t"), &c, func(*jwt.Token) (any, error) { return a.cardKey, nil })
	if err != nil || c.Bookmark != r.PathValue("id") {
		return owner{}, false
	}
	return owner{user: c.Subject, install: c.Install}, true
}

func (a *app) delete(w http.ResponseWriter, r *http.Request) {
	o, ok := ownerOf(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	a.mu.Lock()
	sh := a.shelf(o)
	_, ok = sh.items[id]
	delete(sh.items, id)
	a.mu.Unlock()
	if !ok {
		apptools.WriteError(w, http.StatusNotFound, "not_found", "no bookmark "+id)
		return
	}
	apptools.WriteResult(w, http.StatusOK, apptools.Result{Content: "Deleted " + id + "."})
}

// shareRequest is share_bookmark's input: the recipient is an object of
// its own, to show a nested input schema.
type shareRequest struct {
	ID   string `json:"id"`
	With struct {
		Email string `json:"email"`
		Note  string `json:"note"`
	} `json:"with"`
	Permission    string `json:"permission"`
	ExpiresInDays *int   `json:"expiresInDays"`
	Notify        *bool  `json:"notify"`
}

// emailRE is what an HTML <input type=email> accepts (WHATWG's "valid
// e-mail address"): no quotes, spaces, brackets or parentheses, which the
// JSON Schema "email" format allows in a quoted local part or an address
// literal. maxEmail is the longest address SMTP carries (RFC 5321).
var emailRE = regexp.MustCompile("^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$")

const (
	maxEmail    = 254
	maxNote     = 200 // characters, as the schema's maxLength counts them
	maxDuration = 90  // days
)

// share shares one bookmark with a person by email. The example sends no
// mail and keeps nothing: it shows a nested input and a mailto link; an
// app would send the invitation here.
func (a *app) share(w http.ResponseWriter, r *http.Request) {
	var in shareRequest
	if err := decodeBody(w, r, &in); err != nil {
		apptools.WriteError(w, http.StatusBadRequest, "invalid",
			"the body must be a JSON object {id?, with: {email, note?}, permission?, expiresInDays?, notify?}: "+err.Error())
		return
	}
	// toolgate has checked the input against the schema; these checks are
	// for callers that skip it, and the email's is stricter than the
	// schema's because the address is shown and made a link.
	if in.Permission == "" {
		in.Permission = "view" // the schema's default
	}
	var problem string
	switch id := r.PathValue("id"); {
	case in.ID != "" && in.ID != id:
		problem = fmt.Sprintf("id %q does not match the path's %q", in.ID, id)
	case in.With.Email == "":
		problem = "with.email is required"
	case len(in.With.Email) > maxEmail || !emailRE.MatchString(in.With.Email):
		problem = fmt.Sprintf("with.email %q must be a plain address such as name@example.com", in.With.Email)
	case utf8.RuneCountInString(in.With.Note) > maxNote:
		problem = fmt.Sprintf("with.note must be at most %d characters", maxNote)
	case in.Permission != "view" && in.Permission != "comment":
		problem = fmt.Sprintf("permission %q must be \"view\" or \"comment\"", in.Permission)
	case in.ExpiresInDays != nil && (*in.ExpiresInDays < 1 || *in.ExpiresInDays > maxDuration):
		problem = fmt.Sprintf("expiresInDays must be from 1 to %d", maxDuration)
	}
	b, ok := a.checkedLookup(w, r, problem)
	if !ok {
		return
	}
	// "view, expires in 7 days, notified", leaving out what was not given.
	parts := []string{in.Permission}
	switch {
	case in.ExpiresInDays == nil:
	case *in.ExpiresInDays == 1:
		parts = append(parts, "expires in 1 day")
	default:
		parts = append(parts, fmt.Sprintf("expires in %d days", *in.ExpiresInDays))
	}
	switch {
	case in.Notify == nil:
	case *in.Notify:
		parts = append(parts, "notified")
	default:
		parts = append(parts, "not notified")
	}
	if in.With.Note != "" {
		parts = append(parts, "note: "+strconv.Quote(in.With.Note))
	}
	apptools.WriteResult(w, http.StatusOK, apptools.Result{
		Content: fmt.Sprintf("Shared %s (%s) with %s: %s", b.ID, b.Title, in.With.Email, strings.Join(parts, ", ")),
		Markdown: "Shared **" + markdownLink(b.Title, b.URL) + "** with " + mailtoLink(in.With.Email) +
			" (" + in.Permission + ")",
	})
}

// mailtoLink writes [addr](mailto:addr) for an address emailRE accepts:
// the text escaped as markdownLink escapes a title, the address
// percent-encoded so that none of the characters it may hold (? # % ' `
// and the like) can end the destination or add headers to the mailto URL.
func mailtoLink(addr string) string {
	return "[" + markdownText(addr) + "](mailto:" + url.PathEscape(addr) + ")"
}

// openRequest is open_on_device's input.
type openRequest struct {
	ID         string `json:"id"`
	ComputerID string `json:"computerId"`
}

// maxComputerID is the schema's maxLength for computerId.
const maxComputerID = 64

// askOpen asks one device to open a bookmark: on a thread call it answers
// an action-required card assigned to that device, so toolgate lets only a
// client that says it is that device press "Open" or "Not now" (any client
// may still skip or cancel). Neither button has a target: its input is the
// result. The example opens nothing itself; an app's client on that
// device would open the link when its user presses "Open". An api call
// has no one to ask, so it gets a domain error.
func (a *app) askOpen(w http.ResponseWriter, r *http.Request) {
	var in openRequest
	if err := decodeBody(w, r, &in); err != nil {
		apptools.WriteError(w, http.StatusBadRequest, "invalid", "the body must be a JSON object {id?, computerId}: "+err.Error())
		return
	}
	// The device's name is shown in the card's title and decides who may
	// press its buttons: no line breaks or other controls.
	var problem string
	switch id := r.PathValue("id"); {
	case in.ID != "" && in.ID != id:
		problem = fmt.Sprintf("id %q does not match the path's %q", in.ID, id)
	case in.ComputerID == "":
		problem = "computerId is required"
	case utf8.RuneCountInString(in.ComputerID) > maxComputerID:
		problem = fmt.Sprintf("computerId must be at most %d characters", maxComputerID)
	case strings.ContainsFunc(in.ComputerID, isBreakOrControl):
		problem = "computerId must not hold control characters or line breaks"
	}
	b, ok := a.checkedLookup(w, r, problem)
	if !ok {
		return
	}
	opened, err := json.Marshal(apptools.Result{Content: "Opened " + b.ID + " on " + in.ComputerID + "."})
	if err != nil {
		apptools.WriteError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	card := apptools.Card{
		Title:       "Open “" + b.Title + "” on " + in.ComputerID + "?",
		Description: "Opens " + markdownLink(b.Title, b.URL) + " in a browser on " + markdownText(in.ComputerID) + ".",
		Assignee:    &apptools.Assignee{ComputerID: in.ComputerID},
		Elements: []apptools.Button{
			{Type: "button", ID: "open", Label: "Open", Variant: "primary", Input: opened},
			{Type: "button", ID: "later", Label: "Not now", Input: jsontext.Value(`{"content":"Not opened."}`)},
		},
	}
	writeCard(w, r, card, "opening a bookmark on a device needs a person there to confirm")
}

// isBreakOrControl reports the runes markdownText turns into spaces.
func isBreakOrControl(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// askClear asks the user to confirm before deleting every bookmark: on a
// thread call it answers an action-required card, and toolgate pauses the
// call until a button is pressed. "Delete all" runs POST
// /bookmarks/clear/confirm; "Keep them" needs no round trip, its input is
// the result. An api call has no one to ask, so it gets a domain error.
func (a *app) askClear(w http.ResponseWriter, r *http.Request) {
	o, ok := ownerOf(w, r)
	if !ok {
		return
	}
	found := a.sorted(o)
	if len(found) == 0 {
		apptools.WriteResult(w, http.StatusOK, apptools.Result{Content: "There are no bookmarks to clear."})
		return
	}

	// Name a few, "A", "B" and "C" or "A", "B", "C" and 2 more.
	const shown = 3
	var titles []string
	for _, b := range found[:min(len(found), shown)] {
		titles = append(titles, strconv.Quote(b.Title))
	}
	if more := len(found) - len(titles); more > 0 {
		titles = append(titles, fmt.Sprintf("%d more", more))
	}
	list := titles[len(titles)-1]
	if len(titles) > 1 {
		list = strings.Join(titles[:len(titles)-1], ", ") + " and " + list
	}
	title := "Delete the only bookmark?"
	if len(found) > 1 {
		title = fmt.Sprintf("Delete all %d bookmarks?", len(found))
	}
	// A target spec as in tools.json, on this component as toolgate names it.
	target, err := json.Marshal(struct {
		Type      string `json:"type"`
		Component string `json:"component"`
		Method    string `json:"method"`
		Path      string `json:"path"`
	}{"app", a.component, http.MethodPost, "/bookmarks/clear/confirm"})
	if err != nil {
		apptools.WriteError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	card := apptools.Card{
		Title:       title,
		Description: "This deletes " + list + ". It cannot be undone.",
		Elements: []apptools.Button{
			{Type: "button", ID: "delete", Label: "Delete all", Variant: "danger", Target: target},
			{Type: "button", ID: "keep", Label: "Keep them", Input: jsontext.Value(`{"content":"Kept all bookmarks."}`)},
		},
	}
	writeCard(w, r, card, "clearing bookmarks needs a person to confirm")
}

// writeCard answers a card on a thread call. An api call has no one to
// ask, so it gets the domain error confirmation_required, saying why.
func writeCard(w http.ResponseWriter, r *http.Request, card apptools.Card, why string) {
	switch err := apptools.WriteCard(w, r, card); {
	case errors.Is(err, apptools.ErrNotThread):
		apptools.WriteError(w, http.StatusConflict, "confirmation_required", why+"; call it from a conversation")
	case err != nil:
		// An invalid card is a bug here, not the caller's doing.
		log.Printf("card %q: %v", card.Title, err)
		apptools.WriteError(w, http.StatusInternalServerError, "internal", "could not build the confirmation card")
	}
}

// clearAll deletes every bookmark of the caller: the "Delete all"
// button's target, which toolgate runs with the identity of the call that
// showed the card.
func (a *app) clearAll(w http.ResponseWriter, r *http.Request) {
	o, ok := ownerOf(w, r)
	if !ok {
		return
	}
	a.mu.Lock()
	sh := a.shelf(o)
	n := len(sh.items)
	clear(sh.items)
	a.mu.Unlock()
	var content string
	switch n {
	case 0:
		content = "There were no bookmarks left to delete."
	case 1:
		content = "Deleted the only bookmark."
	default:
		content = fmt.Sprintf("Deleted all %d bookmarks.", n)
	}
	apptools.WriteResult(w, http.StatusOK, apptools.Result{Content: content})
}

// sorted returns a copy of o's bookmarks in the order they were saved.
func (a *app) sorted(o owner) []bookmark {
	a.mu.Lock()
	sh := a.shelf(o)
	found := make([]bookmark, 0, len(sh.items))
	for _, b := range sh.items {
		found = append(found, *b)
	}
	a.mu.Unlock()
	slices.SortFunc(found, func(x, y bookmark) int { return x.seq - y.seq })
	return found
}

// cardPage is the page shown in the tool card's iframe. It tells the card
// its height whenever that changes, so the iframe fits the content as it
// grows and shrinks: "Show details" opens a block below the link.
var cardPage = template.Must(template.New("card").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
  body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: #1f2328; }
  .card { padding: 12px 14px; border-left: 4px solid #0969da; }
  .title { font-size: 16px; font-weight: 600; }
  .url { color: #57606a; word-break: break-all; }
  .tag { display: inline-block; margin: 6px 4px 0 0; padding: 1px 8px; border-radius: 10px; background: #ddf4ff; color: #0969da; font-size: 12px; }
  button { margin-top: 8px; font: inherit; font-size: 12px; }
  /* Not on [hidden]: a display of its own would show it anyway. */
  dl:not([hidden]) { margin: 8px 0 0; display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; }
  dt { color: #57606a; }
  dd { margin: 0; word-break: break-all; }
</style>
</head>
<body>
<div class="card">
  <div class="title"><a href="{{.URL}}" target="_blank" rel="noopener noreferrer">{{.Title}}</a></div>
  <div class="url">{{.URL}}</div>
  {{range .Tags}}<span class="tag">{{.}}</span>{{end}}
  <div><button type="button" id="toggle" aria-expanded="false" aria-controls="details">Show details</button></div>
  <dl id="details" hidden>
    <dt>Id</dt><dd>{{.ID}}</dd>
    <dt>Saved</dt><dd><time datetime="{{.Saved}}">{{.SavedText}}</time></dd>
    <dt>Tags</dt><dd>{{range $i, $t := .Tags}}{{if $i}}, {{end}}{{$t}}{{else}}none{{end}}</dd>
    <dt>Address</dt><dd>{{.URL}}</dd>
  </dl>
</div>
<script>
  // The html element's own height, not its scrollHeight: scrollHeight is
  // never less than the iframe's viewport, so once the card had grown it
  // could not shrink again when the details are hidden.
  function postHeight() {
    const h = Math.ceil(document.documentElement.getBoundingClientRect().height);
    // Any origin: the height is not a secret, and the card embedding this
    // page may be on any site (an app's chat, the playground). The card
    // trusts the message only because it comes from its own iframe.
    window.parent.postMessage({__kazzle_height: h}, "*");
  }
  // The observer calls once when observing starts, then on every change
  // in size: details opened or closed, fonts loaded, the iframe made
  // narrower. Load posts once more, for a parent that listened late.
  new ResizeObserver(postHeight).observe(document.documentElement);
  window.addEventListener("load", postHeight);

  const toggle = document.getElementById("toggle");
  const details = document.getElementById("details");
  toggle.addEventListener("click", () => {
    details.hidden = !details.hidden;
    toggle.setAttribute("aria-expanded", String(!details.hidden));
    toggle.textContent = details.hidden ? "Show details" : "Hide details";
  });
</script>
</body>
</html>
`))

// cardView is what the card page shows of a bookmark.
type cardView struct {
	bookmark
	Saved     string // RFC 3339, for the <time> element
	SavedText string // for people
}

func (a *app) card(w http.ResponseWriter, r *http.Request) {
	o, ok := a.cardOwner(r)
	if !ok {
		// The same answer as an unknown id: a guessed URL learns nothing.
		apptools.WriteError(w, http.StatusNotFound, "not_found", "no bookmark "+r.PathValue("id"))
		return
	}
	b, ok := a.lookup(w, r, o)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	view := cardView{bookmark: b, Saved: b.saved.Format(time.RFC3339), SavedText: b.saved.Format("2 Jan 2006 15:04 MST")}
	if err := cardPage.Execute(w, view); err != nil {
		log.Printf("card %s: %v", b.ID, err)
	}
}

// checkedLookup answers a refused input (problem, when not "") with 400,
// then finds the caller's bookmark named by the {id} path value, as
// lookup does.
func (a *app) checkedLookup(w http.ResponseWriter, r *http.Request, problem string) (bookmark, bool) {
	if problem != "" {
		apptools.WriteError(w, http.StatusBadRequest, "invalid", problem)
		return bookmark{}, false
	}
	o, ok := ownerOf(w, r)
	if !ok {
		return bookmark{}, false
	}
	return a.lookup(w, r, o)
}

// lookup finds o's bookmark named by the {id} path value, or answers 404:
// another owner's bookmark is not found either.
func (a *app) lookup(w http.ResponseWriter, r *http.Request, o owner) (bookmark, bool) {
	id := r.PathValue("id")
	a.mu.Lock()
	b, ok := a.shelf(o).items[id]
	var cp bookmark
	if ok {
		cp = *b
	}
	a.mu.Unlock()
	if !ok {
		apptools.WriteError(w, http.StatusNotFound, "not_found", "no bookmark "+id)
		return bookmark{}, false
	}
	return cp, true
}

// whoami tells who the call is for and where it came from. The identity
// is the one the middleware verified: signed by toolgate, for this
// component, not expired.
func whoami(w http.ResponseWriter, r *http.Request) {
	id, ok := apptools.FromContext(r.Context())
	if !ok {
		// Only reachable if the route lost its middleware.
		apptools.WriteError(w, http.StatusInternalServerError, "internal", "no verified identity")
		return
	}
	install := id.Install
	if install == "" {
		install = "(none)"
	}
	lines := []string{
		"Verified identity:",
		"  user: " + id.User,
		"  install: " + install,
	}
	if exp, ok := id.Claims["exp"].(float64); ok {
		lines = append(lines, "  token expires: "+time.Unix(int64(exp), 0).UTC().Format(time.RFC3339))
	}
	switch tc, err := apptools.ToolContext(r); {
	case err != nil:
		lines = append(lines, "Tool context: "+err.Error())
	case tc.IsThread():
		lines = append(lines, "Tool context: thread "+tc.ThreadID)
	default:
		lines = append(lines, "Tool context: api (no conversation)")
	}
	apptools.WriteResult(w, http.StatusOK, apptools.Result{Content: strings.Join(lines, "\n")})
}

// statusRecorder remembers the status a handler wrote, for the log line.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		log.Printf("%s %s -> %d (%s)", r.Method, r.URL.RequestURI(), rec.status, time.Since(start).Round(time.Microsecond))
	})
}
