package observe

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The example dashboard queries only metrics that exist, so that renaming
// one breaks this test rather than a panel.
func TestDashboardNamesMetrics(t *testing.T) {
	data, err := os.ReadFile("../../examples/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	ch := make(chan *prometheus.Desc, 32)
	go func() {
		for _, c := range NewCollectors().all() {
			c.Describe(ch)
		}
		close(ch)
	}()
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if m := name.FindStringSubmatch(d.String()); m != nil {
			known[m[1]] = true
		}
	}
	used := regexp.MustCompile(`caddy_toolgate_[a-z_]+`).FindAllString(string(data), -1)
	if len(used) == 0 {
		t.Fatal("the dashboard queries no caddy_toolgate_ metric")
	}
	seen := map[string]bool{}
	for _, u := range used {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(u, "_bucket"), "_sum"), "_count")
		if !known[base] {
			t.Errorf("the dashboard queries %s, which toolgate does not export", u)
		}
		seen[base] = true
	}
	for k := range known {
		if !seen[k] {
			t.Errorf("%s is on no panel of the dashboard", k)
		}
	}
}
