package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

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
	cmd.PersistentFlags().StringVar(&f.token, "token", "", "bearer `token` of the native API, when the server has --auth-file (`sluice user add --token` makes one) [env SLUICE_TOKEN]")
	f.tls.addFlags(cmd)
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", "table", "output `format`: table (for people) or json (for scripts)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if f.token == "" {
			f.token = os.Getenv("SLUICE_TOKEN")
		}
		if f.output != "table" && f.output != "json" {
			return fmt.Errorf("--output: want table or json, got %q", f.output)
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
		return cliError(fn(ctx, cmd, f.client(), args), f.server)
	}
}

// cliError makes err one line: the server's reason and message, or why the
// server could not be reached.
func cliError(err error, server string) error {
	if err == nil {
		return nil
	}
	var e *client.Error
	msg := err.Error()
	switch {
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host"):
		msg = fmt.Sprintf("cannot reach the broker at %s (is `sluice serve` running? set --server or SLUICE_SERVER)", server)
	case errors.As(err, &e) && e.Reason != "":
		msg = e.Reason + ": " + e.Message
	case errors.As(err, &e):
		msg = e.Message
	}
	return errors.New(strings.ReplaceAll(msg, "\n", " "))
}

// printJSON writes m as the API's JSON, one document per line.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: false}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// table prints aligned columns with a header row.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// lines returns args, or, when there are none, the non-empty lines of in.
func lines(args []string, in io.Reader) ([]string, error) {
	if len(args) > 0 {
		return args, nil
	}
	var out []string
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if l := strings.TrimRight(sc.Text(), "\r"); l != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
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

// printable shows a body as text when it is, quoted otherwise.
func printable(b []byte) string {
	s := string(b)
	for _, r := range s {
		if r < 0x20 || r == 0xfffd {
			return fmt.Sprintf("%q", s)
		}
	}
	return s
}
