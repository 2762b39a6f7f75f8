package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

// The console in a real browser: headless Chromium (Debian's chromium,
// scripts/test-deps.sh installs it; missing, the test fails, it never
// skips), driven with chromedp. Screenshots go to the test's artifact
// directory (go test -artifacts), or to docs/console/ with
// SLUICE_CONSOLE_SCREENSHOTS=docs (how the committed ones were made).

// browser starts a headless Chromium for the test, and collects every
// console error, uncaught exception and log entry of level error (a
// refused script or style, a failed load) the pages produce.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: run scripts/test-deps.sh (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.NoSandbox, // as root (CI, containers) Chromium refuses to start sandboxed
		chromedp.DisableGPU, chromedp.WindowSize(1280, 860))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	var mu sync.Mutex
	var errs []string
	messages := chromedp.Console(ctx) // starts the browser, and subscribes before any page loads
	go func() {
		// Owned by ctx: the iterator ends when the test's cleanup cancels it.
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1))
				mu.Unlock()
			}
		}
	}()
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := errs
		errs = nil
		return out
	}
}

func screenshotDir(t *testing.T) string {
	if os.Getenv("SLUICE_CONSOLE_SCREENSHOTS") == "docs" {
		return filepath.Join("..", "..", "docs", "console")
	}
	return t.ArtifactDir()
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := screenshotDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sendSQS sends body to queue through the SQS API (JSON protocol), as an
// AWS SDK would.
func sendSQS(t *testing.T, endpoint, queue, body string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint,
		strings.NewReader(fmt.Sprintf(`{"QueueUrl":%q,"MessageBody":%q}`, endpoint+"/000000000000/"+queue, body)))
	req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("SQS SendMessage: %s", resp.Status)
	}
}

// Every page loads with no console error, and shows what it should; a
// message sent through SQS appears in the queue's browser.
func TestBrowserPages(t *testing.T) {
	srv := sluicetest.Start(t, sluicetest.WithSQS())
	seed(t, client.New(srv.URL))
	sendSQS(t, srv.SQSURL, "jobs", "sent-through-sqs")
	ctx, consoleErrors := browser(t)
	for _, p := range []struct{ path, shot, want string }{
		{"/", "overview", "dead letters in 1"},
		{"/ui/queues", "queues", "jobs-dlq"},
		{"/ui/queues/jobs", "queue", "sent-through-sqs"},
		{"/ui/queues/jobs-dlq", "dead-letter-queue", "cannot parse"},
		{"/ui/topics", "topics", "events"},
		{"/ui/topics/events", "topic", "browse"},
		{"/ui/topics/events/0", "partition", "rec-1"},
		{"/ui/groups", "groups", "reporting"},
		{"/ui/groups/reporting", "group", "events"},
		{"/ui/subscriptions", "subscriptions", "audit"},
		{"/ui/cluster", "cluster-single", "single node"},
		{"/ui/users", "users-off", "Authentication is off"},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+p.path), chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
			t.Fatalf("%s: %v", p.path, err)
		}
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			t.Fatalf("%s: %v", p.path, err)
		}
		if !strings.Contains(text, p.want) {
			t.Errorf("%s shows no %q:\n%s", p.path, p.want, text)
		}
		screenshot(t, ctx, p.shot)
		if errs := consoleErrors(); len(errs) > 0 {
			t.Errorf("%s: console errors:\n%s", p.path, strings.Join(errs, "\n"))
		}
	}
}

// A dead letter is looked at, previewed and redriven from the pages: the
// preview counts it without moving it, the redrive page follows the move
// to its end, and the message is back in its source queue.
func TestBrowserRedrive(t *testing.T) {
	srv := sluicetest.Start(t)
	c := client.New(srv.URL)
	seed(t, c)
	ctx, consoleErrors := browser(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/ui/queues/jobs-dlq"),
		chromedp.WaitVisible(chromedp.ID("preview")),
		chromedp.Click(chromedp.ID("preview")),
		chromedp.WaitVisible(chromedp.ID("preview-count")),
	)
	if err != nil {
		t.Fatal(err)
	}
	count, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("preview-count")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(count, "Would move 1 of 1") {
		t.Errorf("preview says %q", count)
	}
	screenshot(t, ctx, "redrive-preview")
	if dlq, _ := c.GetQueue(t.Context(), "jobs-dlq"); depthOf(dlq) != 1 {
		t.Fatalf("the preview moved something: dlq depth %d", depthOf(dlq))
	}
	err = chromedp.Do(ctx, chromedp.Click(chromedp.ID("start-redrive")), chromedp.WaitVisible(chromedp.ID("redrive-state")))
	if err != nil {
		t.Fatal(err)
	}
	done, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("redrive-state").textContent === "completed"`,
		chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil || !done {
		state, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("redrive-state")))
		t.Fatalf("redrive page: %v (state %q)", err, state)
	}
	screenshot(t, ctx, "redrive-done")
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
	page, err := c.Peek(t.Context(), "jobs", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var back bool
	for _, m := range page.GetMessages() {
		back = back || string(m.GetMessage().GetBody()) == "poison"
	}
	if !back {
		t.Errorf("the redriven message is not in jobs: %v", page.GetMessages())
	}
	if dlq, _ := c.GetQueue(t.Context(), "jobs-dlq"); depthOf(dlq) != 0 {
		t.Errorf("dlq depth %d after the redrive, want 0", depthOf(dlq))
	}
}

// A queue is created, configured, purged and deleted from the pages, as a person would:
// open the form, type, click; each step's notice shows and the API agrees.
func TestBrowserManageQueue(t *testing.T) {
	srv := sluicetest.Start(t)
	c := client.New(srv.URL)
	ctx, consoleErrors := browser(t)
	flash := func(step string, actions ...chromedp.Action[chromedp.Void]) string {
		t.Helper()
		if err := chromedp.Do(ctx, append(actions, chromedp.WaitVisible(chromedp.ID("flash")))...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("flash")))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if errs := consoleErrors(); len(errs) > 0 {
			t.Errorf("%s: console errors:\n%s", step, strings.Join(errs, "\n"))
		}
		return text
	}
	if got := flash("create",
		chromedp.Navigate(srv.URL+"/ui/queues"),
		chromedp.Click(chromedp.CSS("#create-queue summary")),
		chromedp.SendKeys(chromedp.ID("new-queue-name"), "orders"),
		chromedp.Click(chromedp.ID("create-queue-button")),
	); got != "Queue created." {
		t.Errorf("after create: %q", got)
	}
	screenshot(t, ctx, "queue-created")
	for _, b := range []string{"a", "b", "c"} {
		if _, err := c.Send(t.Context(), "orders", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	if got := flash("settings",
		chromedp.Navigate(srv.URL+"/ui/queues/orders"),
		chromedp.Click(chromedp.CSS("#edit-settings summary")),
		chromedp.SetValue(chromedp.CSS(`#edit-settings input[name="visibility"]`), "120"),
		chromedp.Click(chromedp.ID("save-settings")),
	); got != "Settings saved." {
		t.Errorf("after settings: %q", got)
	}
	if q, _ := c.GetQueue(t.Context(), "orders"); q.GetConfig().GetVisibilityTimeout().AsDuration() != 2*time.Minute {
		t.Errorf("visibility after the form: %v", q.GetConfig().GetVisibilityTimeout())
	}
	if got := flash("purge",
		chromedp.Navigate(srv.URL+"/ui/queues/orders"), // a page with no notice yet
		chromedp.Click(chromedp.CSS("#danger summary")),
		chromedp.SendKeys(chromedp.ID("purge-confirm"), "orders"),
		chromedp.Click(chromedp.ID("purge")),
	); got != "Queue purged: 3 messages deleted." {
		t.Errorf("after purge: %q", got)
	}
	screenshot(t, ctx, "queue-purged")
	if q, _ := c.GetQueue(t.Context(), "orders"); depthOf(q) != 0 {
		t.Errorf("depth after the purge: %d", depthOf(q))
	}
}
