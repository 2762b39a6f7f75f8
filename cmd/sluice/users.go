package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/internal/auth"
)

// `sluice user` and `sluice acl` edit the users file (--auth-file) that a
// running server rereads every 2 s and on SIGHUP. They never talk to the
// server: the file is the one source of truth, and every edit goes through
// auth.Edit (a flock beside the file, atomic replace, mode 0600).

func init() { subcommands = append(subcommands, newUserCmd, newACLCmd) }

// authFileFlag adds the --auth-file flag every user and acl command needs.
func authFileFlag(cmd *cobra.Command, path *string) {
	cmd.PersistentFlags().StringVar(path, "auth-file", os.Getenv("SLUICE_AUTH_FILE"),
		"the users `file` \"sluice serve --auth-file\" reads [env SLUICE_AUTH_FILE]")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if *path == "" {
			return errors.New("--auth-file is required (or set SLUICE_AUTH_FILE): the users file the server reads")
		}
		return nil
	}
}

func newUserCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Add, remove and list the users of the auth file (passwords, SQS access keys, API tokens)",
		Long: `Edit the users of the auth file that "sluice serve --auth-file" reads. A running
server picks an edit up within 2 seconds (or at once on SIGHUP).

A password (Kafka SASL PLAIN and SCRAM) is stored as SCRAM-SHA-256 and -512
salted keys, a token (native API, Authorization: Bearer) as its SHA-256: both
are printed never. An SQS access key's secret must be kept as it is (SigV4 is
an HMAC keyed by it), which is why the file is written 0600. A new token and a
new access key are printed once, on creation: keep them then.`,
		Example: `  sluice user add billing --token --auth-file users.yaml
  echo -n 's3cret' | sluice user add kafka-app --password-stdin --auth-file users.yaml
  sluice user add sqs-app --access-key --auth-file users.yaml
  sluice acl add --user billing --allow produce,consume --resource topic:orders --auth-file users.yaml`,
		Args: cobra.NoArgs,
	}
	authFileFlag(cmd, &path)
	cmd.AddCommand(userAddCmd(&path), userRemoveCmd(&path), userListCmd(&path), userPasswdCmd(&path),
		userTokenCmd(&path), userAccessKeyCmd(&path))
	return cmd
}

// passwordFlags pick where a password comes from.
type passwordFlags struct{ stdin, prompt bool }

func (p *passwordFlags) add(cmd *cobra.Command, optional bool) {
	cmd.Flags().BoolVar(&p.stdin, "password-stdin", false, "read the password from the first line of stdin")
	if optional {
		cmd.Flags().BoolVar(&p.prompt, "password", false, "ask for a password on the terminal (the default when no --token or --access-key is given)")
	}
}

// read gets the password from stdin or the terminal.
func (p *passwordFlags) read(cmd *cobra.Command) (string, error) {
	if p.stdin {
		line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		pw := strings.TrimRight(line, "\r\n")
		if pw == "" {
			return "", errors.New("--password-stdin: stdin held no password")
		}
		return pw, nil
	}
	pw, err := promptPassword(cmd.ErrOrStderr(), "Password: ")
	if err != nil {
		return "", err
	}
	again, err := promptPassword(cmd.ErrOrStderr(), "Again: ")
	if err != nil {
		return "", err
	}
	if pw != again {
		return "", errors.New("the passwords differ")
	}
	if pw == "" {
		return "", errors.New("the password is empty")
	}
	return pw, nil
}

func userAddCmd(path *string) *cobra.Command {
	var pw passwordFlags
	var token, accessKey bool
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a user with a password, an API token and/or an SQS access key",
		Long: `Add a user. Without --token or --access-key it asks for a password (or reads
one with --password-stdin). --token prints a new bearer token for the native
API and --access-key a new SQS access key id and secret: each is shown only
now. The user may do nothing until "sluice acl add" grants it something.`,
		Example: `  sluice user add billing --token --auth-file users.yaml
  echo -n 's3cret' | sluice user add kafka-app --password-stdin --auth-file users.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			u := auth.User{Name: name}
			if pw.stdin || pw.prompt || (!token && !accessKey) {
				p, err := pw.read(cmd)
				if err != nil {
					return err
				}
				if err := u.SetPassword(p, auth.DefaultIterations); err != nil {
					return err
				}
			}
			var tok string
			if token {
				var err error
				if tok, err = auth.NewToken(); err != nil {
					return err
				}
				u.Tokens = []string{auth.HashToken(tok)}
			}
			var key auth.AccessKey
			if accessKey {
				key = newAccessKey()
				u.AccessKeys = []auth.AccessKey{key}
			}
			err := auth.Edit(*path, func(f *auth.File) error {
				if f.User(name) != nil {
					return fmt.Errorf("user %q exists (sluice user passwd changes a password; sluice user remove, then add, replaces it)", name)
				}
				f.Users = append(f.Users, u)
				return nil
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "added user %s\n", name)
			if tok != "" {
				fmt.Fprintf(out, "token: %s\n", tok)
			}
			if accessKey {
				fmt.Fprintf(out, "access key id: %s\nsecret access key: %s\n", key.ID, key.Secret)
			}
			switch {
			case tok != "" && accessKey:
				fmt.Fprintln(cmd.ErrOrStderr(), "(shown once: the file keeps the token only hashed and the secret access key in clear, as SigV4 needs it; no command prints either again; store them now)")
			case tok != "":
				fmt.Fprintln(cmd.ErrOrStderr(), "(shown once: the file keeps the token only hashed; store it now)")
			case accessKey:
				fmt.Fprintln(cmd.ErrOrStderr(), "(shown once: the file keeps the secret access key in clear, as SigV4 needs it, but no command prints it again; store it now)")
			}
			return nil
		},
	}
	pw.add(cmd, true)
	cmd.Flags().BoolVar(&token, "token", false, "make a bearer token for the native API and print it")
	cmd.Flags().BoolVar(&accessKey, "access-key", false, "make an SQS access key (id and secret) and print it")
	return cmd
}

// newAccessKey makes an AWS-shaped key pair: a 20-character id starting
// "AKIA" (tools check the shape) and a 40-character secret.
func newAccessKey() auth.AccessKey {
	id := make([]byte, 10)
	secret := make([]byte, 30)
	// crypto/rand.Read never fails on Linux (Go 1.24+: it panics instead).
	_, _ = rand.Read(id)
	_, _ = rand.Read(secret)
	return auth.AccessKey{ID: "AKIA" + base32.StdEncoding.EncodeToString(id),
		Secret: base64.StdEncoding.EncodeToString(secret)}
}

func userRemoveCmd(path *string) *cobra.Command {
	return &cobra.Command{
		Use:     "remove NAME",
		Short:   "Remove a user and its credentials (its ACL rules stay until sluice acl remove)",
		Example: `  sluice user remove billing --auth-file users.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, rules := args[0], 0
			err := auth.Edit(*path, func(f *auth.File) error {
				i := slices.IndexFunc(f.Users, func(u auth.User) bool { return u.Name == name })
				if i < 0 {
					return fmt.Errorf("no user %q in %s", name, *path)
				}
				f.Users = slices.Delete(f.Users, i, i+1)
				for _, r := range f.ACLs {
					if r.User == name {
						rules++
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed user %s\n", name)
			if rules > 0 {
				// Kept on purpose: a client certificate with this CN is still
				// this principal, and rules are removed as deliberately as
				// they were added.
				fmt.Fprintf(cmd.ErrOrStderr(), "%d ACL rules still name %s (a client certificate with that CN keeps them); sluice acl remove --user %s drops them\n", rules, name, name)
			}
			return nil
		},
	}
}

func userListCmd(path *string) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the users and which credentials each has (never the secrets)",
		Example: `  sluice user list --auth-file users.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := auth.ReadFile(*path)
			if err != nil {
				return err
			}
			rows := make([][]string, len(f.Users))
			for i, u := range f.Users {
				pw := "-"
				switch {
				case u.Password != "":
					pw = "clear text (sluice user passwd stores it salted)"
				case u.SCRAMSHA256 != nil || u.SCRAMSHA512 != nil:
					pw = "scram"
				}
				keys := make([]string, len(u.AccessKeys))
				for j, k := range u.AccessKeys {
					keys[j] = k.ID
				}
				rows[i] = []string{u.Name, pw, strconv.Itoa(len(u.Tokens)), orDash(strings.Join(keys, ","))}
			}
			return table(cmd.OutOrStdout(), []string{"NAME", "PASSWORD", "TOKENS", "ACCESS KEYS"}, rows)
		},
	}
}

func userPasswdCmd(path *string) *cobra.Command {
	var pw passwordFlags
	cmd := &cobra.Command{
		Use:   "passwd NAME",
		Short: "Set a user's password (asked on the terminal, or --password-stdin)",
		Example: `  sluice user passwd billing --auth-file users.yaml
  echo -n 'n3w' | sluice user passwd billing --password-stdin --auth-file users.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			p, err := pw.read(cmd)
			if err != nil {
				return err
			}
			err = auth.Edit(*path, func(f *auth.File) error {
				u := f.User(name)
				if u == nil {
					return fmt.Errorf("no user %q in %s", name, *path)
				}
				return u.SetPassword(p, auth.DefaultIterations)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "password of %s changed\n", name)
			return nil
		},
	}
	pw.add(cmd, false)
	return cmd
}

// userTokenCmd and userAccessKeyCmd give an existing user a new credential
// (printed once), and with --replace revoke the ones it had: rotation, or
// the way back from a lost token, without touching its other credentials.
func userTokenCmd(path *string) *cobra.Command {
	var replace bool
	cmd := &cobra.Command{
		Use:   "token NAME",
		Short: "Give a user a new API token (printed once); --replace revokes its other tokens",
		Example: `  sluice user token billing --auth-file users.yaml
  sluice user token billing --replace --auth-file users.yaml   # rotate: only the new one works`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := auth.NewToken()
			if err != nil {
				return err
			}
			if err := editUser(*path, args[0], func(u *auth.User) {
				if replace {
					u.Tokens = nil
				}
				u.Tokens = append(u.Tokens, auth.HashToken(tok))
			}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token: %s\n", tok)
			fmt.Fprintln(cmd.ErrOrStderr(), "(shown once: the file keeps the token only hashed; store it now)")
			return nil
		},
	}
	cmd.Flags().BoolVar(&replace, "replace", false, "revoke the user's other tokens")
	return cmd
}

func userAccessKeyCmd(path *string) *cobra.Command {
	var replace bool
	cmd := &cobra.Command{
		Use:     "access-key NAME",
		Short:   "Give a user a new SQS access key (printed once); --replace revokes its other keys",
		Example: `  sluice user access-key sqs-app --replace --auth-file users.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := newAccessKey()
			if err := editUser(*path, args[0], func(u *auth.User) {
				if replace {
					u.AccessKeys = nil
				}
				u.AccessKeys = append(u.AccessKeys, key)
			}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "access key id: %s\nsecret access key: %s\n", key.ID, key.Secret)
			return nil
		},
	}
	cmd.Flags().BoolVar(&replace, "replace", false, "revoke the user's other access keys")
	return cmd
}

// editUser applies fn to the named user of the file.
func editUser(path, name string, fn func(*auth.User)) error {
	return auth.Edit(path, func(f *auth.File) error {
		u := f.User(name)
		if u == nil {
			return fmt.Errorf("no user %q in %s", name, path)
		}
		fn(u)
		return nil
	})
}
