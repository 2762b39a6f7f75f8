package main

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
)

// fieldsAnnotation is the cobra annotation by which a command names the
// flags behind API fields whose flag is not the field's name in kebab
// case: "destination_queue=to,max_per_second=rate". cliError uses it to
// speak of --to where the server said destination_queue.
const fieldsAnnotation = "sluice/fields"

// hints say what to do after a refusal, by the server's reason. The
// server's message says what was wrong; these add the next step.
var hints = map[string]string{
	"QUEUE_NOT_FOUND":          "`sluice queue list` shows the queues; `sluice queue create NAME` makes one",
	"TOPIC_NOT_FOUND":          "`sluice topic list` shows the topics; `sluice topic create NAME` makes one",
	"GROUP_NOT_FOUND":          "`sluice group list` shows the groups",
	"SUBSCRIPTION_NOT_FOUND":   "`sluice topic subscription list TOPIC` shows a topic's subscriptions",
	"REDRIVE_NOT_FOUND":        "`sluice dlq redrives` shows the redrives and their ids",
	"RECEIPT_STALE":            "that delivery is over, acked or handed out again after its visibility ran out: receive the message again for a current receipt",
	"RECEIPT_INVALID":          "pass a receipt whole, as `sluice queue receive` printed it, to the queue it came from",
	"QUEUE_ALREADY_EXISTS":     "change its settings with `sluice queue update`",
	"QUEUE_IS_NOT_DEAD_LETTER": "no queue dead-letters into it, so its messages have no source to go back to",
	"EXTENSION_LIMIT_EXCEEDED": "the delivery reached the queue's maximum visibility extension: ack or nack it",
	"GROUP_ACTIVE":             "the group has members: stop its consumers first (`sluice group describe GROUP` lists them)",
	"UNAUTHENTICATED":          "pass --token (or SLUICE_TOKEN), or a client certificate with --tls-client-cert and --tls-client-key",
	"PERMISSION_DENIED":        "an operator can grant it with `sluice acl add` (docs/security.md)",
	"NOT_READY":                "the broker is still starting: try again in a moment",
	"SHUTTING_DOWN":            "the broker is stopping: try again once it is back",
	"STORAGE_FULL":             "the broker's disk is full: docs/operations.md (\"A full disk\") says what to do",
}

// cliError makes err one line: the server's reason, its message in the
// terms of this command's flags, and what to do; or why the server could
// not be reached.
func cliError(err error, server string, cmd *cobra.Command) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var e *client.Error
	switch {
	case errors.As(err, &e) && e.Reason != "":
		// A refusal by the server (a transport failure has no reason).
		// Keep what the command said around the server's error ("after 3
		// of 10 sent: …"), and replace the client's wording of it.
		msg = strings.Replace(msg, e.Error(), describe(e, cmd), 1)
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host"):
		msg = fmt.Sprintf("cannot reach the broker at %s (is `sluice serve` running? set --server or SLUICE_SERVER)", server)
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		msg = fmt.Sprintf("the broker at %s speaks http, not https: use an http:// --server, or start it with TLS", server)
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:"):
		msg = fmt.Sprintf("TLS with %s failed: %s (trust a private CA with --tls-ca FILE)", server, strings.TrimPrefix(msg, "sluice: "))
	case clientCertGiven(cmd) && strings.Contains(msg, "connection reset by peer"):
		// TLS 1.3: the server checks the client's certificate after the client thinks the
		// handshake done, and a refusal reaches it as a reset on its first write.
		msg += " (the broker may have refused the client certificate: expired, or not issued by a CA in its --tls-client-ca)"
	case errors.As(err, &e):
		msg = strings.Replace(msg, e.Error(), describe(e, cmd), 1)
	}
	return errors.New(strings.ReplaceAll(msg, "\n", " "))
}

// describe is one refusal: "REASON: message (hint)", with API field names
// in the message replaced by the command's flags.
func describe(e *client.Error, cmd *cobra.Command) string {
	out := e.Reason
	if out == "" {
		out = e.Code.String()
	}
	if m := e.Message; m != "" && m != e.Reason {
		out += ": " + flagWords(m, e.Metadata["field"], cmd)
	}
	h, ok := hints[e.Reason]
	if e.Reason == "UNAUTHENTICATED" && clientCertGiven(cmd) {
		// Go's TLS client sends no certificate the server's CA list does not name: one
		// was given, so it is that one the broker did not take.
		h, ok = "the client certificate given was not accepted: it must be issued by a CA the broker trusts (its --tls-client-ca) and be valid now; or pass --token", true
	}
	if ok {
		out += " (" + h + ")"
	}
	return out
}

// clientCertGiven reports whether the command was given a client certificate (flag or
// environment).
func clientCertGiven(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flag("tls-client-cert")
	return f != nil && f.Value.String() != ""
}

var fieldRE = regexp.MustCompile(`\b[a-z][a-z0-9]*(?:_[a-z0-9]+)*\b`)

// flagWords replaces the API field names in msg that name a flag of cmd:
// every snake_case word, and field (the refused field, from the error's
// metadata) even when it is one plain word such as "delay".
func flagWords(msg, field string, cmd *cobra.Command) string {
	if cmd == nil {
		return msg
	}
	return fieldRE.ReplaceAllStringFunc(msg, func(w string) string {
		if !strings.Contains(w, "_") && w != field {
			return w
		}
		if f := flagFor(cmd, w); f != "" {
			return "--" + f
		}
		return w
	})
}

// flagFor finds cmd's flag for an API field: the command's own mapping,
// else a flag named as the field in kebab case.
func flagFor(cmd *cobra.Command, field string) string {
	for _, pair := range strings.Split(cmd.Annotations[fieldsAnnotation], ",") {
		if k, v, ok := strings.Cut(pair, "="); ok && k == field {
			return v
		}
	}
	name := strings.ReplaceAll(field, "_", "-")
	if cmd.Flags().Lookup(name) != nil {
		return name
	}
	return ""
}

// serverURL accepts what people type for --server: a URL, or a bare
// host:port, which means http:// (the broker's default listener is plain
// HTTP on 127.0.0.1:8080).
func serverURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--server %q: want a URL such as http://127.0.0.1:8080 (or host:port, meaning http://)", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// withFields sets cmd's field-to-flag mapping for error messages.
func withFields(cmd *cobra.Command, pairs string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[fieldsAnnotation] = pairs
	return cmd
}
