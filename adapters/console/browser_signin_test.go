package console_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
)

// TestPasswordSignInInABrowser signs a rollout manager in with a password
// in a real headless Chromium: back where they were going, with the
// start-rollout form, and a firmware page without the publish form their
// role may not post.
func TestPasswordSignInInABrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Skip(t, "chromium", fmt.Sprintf("no browser at %s (%v): install Debian's chromium (apt-get install -y chromium) to run the console's browser test; the handler tests ran without it", chromiumPath, err))
	}
	e := newAccountsEnv(t, map[string]domain.Role{"rita": domain.RoleRolloutManager})
	e.publish("cam", "2.0.0")
	ctx := browser(t)
	base := e.srv.URL + "/console"
	run(t, ctx, "sign in with a password",
		chromedp.Navigate(base+"/rollouts"),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "rita"),
		chromedp.SendKeys(chromedp.ID("password"), userPassword),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.ID("start-rollout")), // back where we were going
	)
	run(t, ctx, "the firmware page",
		chromedp.Navigate(base+"/firmwares"),
		chromedp.WaitVisible(chromedp.CSS("table.list")),
	)
	publish, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#publish, #upload-form, a.danger")).map(e => e.id || e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(publish) != 0 {
		t.Errorf("a rollout manager is shown %v on the firmware page", publish)
	}
}
