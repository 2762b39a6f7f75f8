package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
)

// defaultServer is where the client subcommands look for a broker.
const defaultServer = "http://127.0.0.1:8080"

// clientFlags are the flags every client subcommand shares.
type clientFlags struct {
	server string
	output string
	token  string
	tls    clientTLS
}

// newClientGroup builds a parent command ("queue", "topic", …) whose
// subcommands talk to a server through the Go client.
func newClientGroup(use, short string, f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	server := defaultServer
	if v, ok := os.LookupEnv("SLUICE_SERVER"); ok && v != "" {
		server = v
	}
	cmd.PersistentFlags().StringVar(&f.server, "server", server, "broker `URL` [env SLUICE_SERVER]")
	// The flag's default is not shown in --help: it would print the secret.
	cmd.PersistentFlags().StringVar(&f.token, "token", "", "bearer `token` of the native API, when the server has --auth-file (\"sluice user add --token\" makes one) [env SLUICE_TOKEN]")
	f.tls.addFlags(cmd)
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", "table", "output `format`: table (for people) or json (one document, for scripts; docs/cli.md)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if f.token == "" {
			f.token = os.Getenv("SLUICE_TOKEN")
		}
		if f.output != "table" && f.output != "json" {
			return fmt.Errorf("--output: want table or json, got %q", f.output)
		}
		var err error
		if f.server, err = serverURL(f.server); err != nil {
			return err
		}
		return f.tls.load()
	}
	return cmd
}

func (f *clientFlags) client() *client.Client {
	var opts []client.Option
	if f.token != "" {
		opts = append(opts, client.WithToken(f.token))
	}
	if f.tls.config != nil {
		opts = append(opts, client.WithTLS(f.tls.config))
	}
	return client.New(f.server, opts...)
}

func (f *clientFlags) json() bool { return f.output == "json" }

// runE adapts a client action: it gets a context that ends on Ctrl-C and
// its error is turned into one line naming the server's reason.
func runE(f *clientFlags, fn func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return cliError(fn(ctx, cmd, f.client(), args), f.server, cmd)
	}
}

// lines returns args, or, when there are none, the non-empty lines of in
// and how many empty ones it skipped.
func lines(args []string, in io.Reader) ([]string, int, error) {
	if len(args) > 0 {
		return args, 0, nil
	}
	var out []string
	skipped := 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if l := strings.TrimRight(sc.Text(), "\r"); l != "" {
			out = append(out, l)
		} else {
			skipped++
		}
	}
	return out, skipped, sc.Err()
}

// progressMin is the smallest job worth a progress line.
const progressMin = 100

// progress shows "label n/total" on one stderr line, redrawn at most ten
// times a second, for work that takes a while.
type progress struct {
	w      io.Writer
	label  string
	total  int64
	last   time.Time
	shown  bool
	silent bool
}

func newProgress(cmd *cobra.Command, label string, total int64) *progress {
	return &progress{w: cmd.ErrOrStderr(), label: label, total: total, silent: total >= 0 && total < progressMin}
}

func (p *progress) update(n int64) {
	if p.silent || (p.total < 0 && n < progressMin) || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last, p.shown = time.Now(), true
	if p.total > 0 {
		fmt.Fprintf(p.w, "\r%s %d/%d (%d%%)", p.label, n, p.total, n*100/p.total)
	} else {
		fmt.Fprintf(p.w, "\r%s %d", p.label, n)
	}
}

// done prints the final count and ends the line, if a line was started.
func (p *progress) done(n int64) {
	if !p.shown {
		return
	}
	p.last = time.Time{}
	p.update(n)
	fmt.Fprintln(p.w)
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return d.Round(time.Millisecond).String()
}
