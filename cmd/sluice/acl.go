package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/internal/auth"
)

func newACLCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Add, remove and list the access rules of the auth file",
		Long: `Edit the access rules (ACLs) of the auth file. A rule allows or denies
operations on resources to one user (or "*", every authenticated user); a
matching deny wins over any allow, and with no matching allow the answer is
no. Describe is implied by any other allowed operation on the same resource.

Operations: produce (send), consume (receive, ack, nack, extend, offset
commits, group membership), create, delete (purge too), alter, describe,
redrive, all.
Resources: topic:NAME, queue:NAME, group:NAME, a prefix with a trailing *
(queue:emails*), cluster (the operator's reports), or * (everything).
A running server picks an edit up within 2 seconds.`,
		Example: `  sluice acl add --user billing --allow produce,consume --resource topic:orders --auth-file users.yaml
  sluice acl add --user billing --allow consume --resource 'queue:emails*' --auth-file users.yaml
  sluice acl add --user admin --allow all --resource '*' --auth-file users.yaml
  sluice acl add --user '*' --deny delete --resource 'topic:*' --auth-file users.yaml
  sluice acl list --auth-file users.yaml
  sluice acl remove --user billing --resource topic:orders --auth-file users.yaml`,
		Args: cobra.NoArgs,
	}
	authFileFlag(cmd, &path)
	cmd.AddCommand(aclAddCmd(&path), aclRemoveCmd(&path), aclListCmd(&path))
	return cmd
}

// ruleFlags are a rule as flags.
type ruleFlags struct {
	user             string
	allow, deny, res []string
}

func (r *ruleFlags) add(cmd *cobra.Command, verb string) {
	cmd.Flags().StringVar(&r.user, "user", "", "the `user` "+verb+" (a name, or * for every authenticated user)")
	cmd.Flags().StringSliceVar(&r.allow, "allow", nil, "`operations` "+verb+" allowed, comma-separated")
	cmd.Flags().StringSliceVar(&r.deny, "deny", nil, "`operations` "+verb+" denied, comma-separated")
	cmd.Flags().StringSliceVar(&r.res, "resource", nil, "`resources`, comma-separated or repeated: topic:orders, queue:emails*, group:g, cluster, *")
}

// rule parses the flags into a rule; fields not given stay empty.
func (r *ruleFlags) rule() (auth.Rule, error) {
	out := auth.Rule{User: r.user}
	for _, o := range r.allow {
		op, err := auth.ParseOperation(o)
		if err != nil {
			return out, fmt.Errorf("--allow: %w", err)
		}
		out.Allow = append(out.Allow, op)
	}
	for _, o := range r.deny {
		op, err := auth.ParseOperation(o)
		if err != nil {
			return out, fmt.Errorf("--deny: %w", err)
		}
		out.Deny = append(out.Deny, op)
	}
	for _, s := range r.res {
		p, err := auth.ParsePattern(s)
		if err != nil {
			return out, fmt.Errorf("--resource: %w", err)
		}
		out.Resources = append(out.Resources, p)
	}
	return out, nil
}

func aclAddCmd(path *string) *cobra.Command {
	var rf ruleFlags
	cmd := &cobra.Command{
		Use:     "add --user U (--allow OPS | --deny OPS) --resource R",
		Short:   "Add a rule allowing or denying operations on resources to a user",
		Example: `  sluice acl add --user billing --allow produce,consume --resource topic:orders --auth-file users.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := rf.rule()
			if err != nil {
				return err
			}
			if r.User == "" || len(r.Resources) == 0 || len(r.Allow)+len(r.Deny) == 0 {
				return errors.New("name a --user, at least one --resource, and --allow or --deny operations")
			}
			err = auth.Edit(*path, func(f *auth.File) error {
				if slices.ContainsFunc(f.ACLs, func(o auth.Rule) bool { return sameRule(o, r) }) {
					return fmt.Errorf("the rule exists already: %s", ruleText(r))
				}
				f.ACLs = append(f.ACLs, r)
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added %s\n", ruleText(r))
			return nil
		},
	}
	rf.add(cmd, "the rule is for")
	return cmd
}

func aclRemoveCmd(path *string) *cobra.Command {
	var rf ruleFlags
	cmd := &cobra.Command{
		Use:   "remove --user U [--allow OPS] [--deny OPS] [--resource R]",
		Short: "Remove the user's rules that match the flags given",
		Long: `Remove every rule of --user whose fields match the flags given; a flag not
given matches anything, so "sluice acl remove --user bob" removes all of bob's
rules. It is an error if nothing matches.`,
		Example: `  sluice acl remove --user billing --resource topic:orders --auth-file users.yaml
  sluice acl remove --user bob --auth-file users.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			want, err := rf.rule()
			if err != nil {
				return err
			}
			if want.User == "" {
				return errors.New("--user is required")
			}
			var removed []auth.Rule
			err = auth.Edit(*path, func(f *auth.File) error {
				f.ACLs = slices.DeleteFunc(f.ACLs, func(r auth.Rule) bool {
					if ruleMatches(r, want) {
						removed = append(removed, r)
						return true
					}
					return false
				})
				if len(removed) == 0 {
					return fmt.Errorf("no rule of %s matches", want.User)
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, r := range removed {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", ruleText(r))
			}
			return nil
		},
	}
	rf.add(cmd, "to remove")
	return cmd
}

func aclListCmd(path *string) *cobra.Command {
	var user string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the access rules, in the file's order",
		Example: `  sluice acl list --auth-file users.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := auth.ReadFile(*path)
			if err != nil {
				return err
			}
			var rows [][]string
			for i, r := range f.ACLs {
				if user != "" && r.User != user {
					continue
				}
				rows = append(rows, []string{strconv.Itoa(i + 1), r.User, orDash(opsText(r.Allow)),
					orDash(opsText(r.Deny)), patternsText(r.Resources)})
			}
			return table(cmd.OutOrStdout(), []string{"#", "USER", "ALLOW", "DENY", "RESOURCES"}, rows)
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "only this `user`'s rules")
	return cmd
}

func opsText(ops []auth.Operation) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = string(o)
	}
	return strings.Join(s, ",")
}

func patternsText(ps []auth.Pattern) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ",")
}

func ruleText(r auth.Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "user %s", r.User)
	if len(r.Allow) > 0 {
		fmt.Fprintf(&b, " allow %s", opsText(r.Allow))
	}
	if len(r.Deny) > 0 {
		fmt.Fprintf(&b, " deny %s", opsText(r.Deny))
	}
	fmt.Fprintf(&b, " on %s", patternsText(r.Resources))
	return b.String()
}

// sameSet compares two lists as sets (rules are order-insensitive).
func sameSet[T comparable](a, b []T) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

func sameRule(a, b auth.Rule) bool {
	return a.User == b.User && sameSet(a.Allow, b.Allow) && sameSet(a.Deny, b.Deny) && sameSet(a.Resources, b.Resources)
}

// ruleMatches: r is want.User's and every field want gives equals r's.
func ruleMatches(r, want auth.Rule) bool {
	return r.User == want.User &&
		(len(want.Allow) == 0 || sameSet(r.Allow, want.Allow)) &&
		(len(want.Deny) == 0 || sameSet(r.Deny, want.Deny)) &&
		(len(want.Resources) == 0 || sameSet(r.Resources, want.Resources))
}
