package node

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/diskguard"
	"github.com/sluice-mq/sluice/internal/metrics"
	"github.com/sluice-mq/sluice/internal/server"
)

// CorruptionPath is where the HTTP listener reports what storage found
// damaged (`sluice admin corruption` reads it).
const CorruptionPath = "/v1/admin/corruption"

// NodePath reports this node's disk and fsync health (NodeReport), what the
// console's overview and `sluice admin node` show.
const NodePath = "/v1/admin/node"

// NodeReport is NodePath's JSON answer.
type NodeReport struct {
	DataDir       string               `json:"data_dir"`
	DiskFreeBytes uint64               `json:"disk_free_bytes"` // 0 with size 0: not known here
	DiskSizeBytes uint64               `json:"disk_size_bytes"`
	WriteFailure  string               `json:"write_failure,omitempty"` // the disk refuses writes (full, failing)
	OpenFiles     int                  `json:"open_files"`
	MaxOpenFiles  int                  `json:"max_open_files"`
	Fsync         metrics.FsyncSummary `json:"fsync"` // since the process started
}

// UsersPath lists the users and access rules in force (UsersReport), never a
// secret: the console's users page and `sluice admin users`. 404 when
// authentication is off.
const UsersPath = "/v1/admin/users"

// UsersReport is UsersPath's JSON answer.
type UsersReport struct {
	AuthFile string             `json:"auth_file"`
	Users    []auth.UserSummary `json:"users"`
	Rules    []RuleView         `json:"rules"`
}

// RuleView is one access rule as JSON.
type RuleView struct {
	User      string   `json:"user"`
	Allow     []string `json:"allow"`
	Deny      []string `json:"deny"`
	Resources []string `json:"resources"`
	Label     string   `json:"label,omitempty"`
}

// CorruptionReport is CorruptionPath's JSON answer.
type CorruptionReport struct {
	// CorruptBatchesTotal counts the damaged batches found since the start
	// (sluice_storage_corrupt_batches_total); Batches lists every one still
	// recorded, from this run or earlier ones.
	CorruptBatchesTotal int64           `json:"corrupt_batches_total"`
	Batches             []CorruptRecord `json:"batches"`
	// Unavailable lists the queues that could not be opened at start.
	Unavailable []string `json:"unavailable_queues"`
}

// CorruptRecord is one quarantined range of a log.
type CorruptRecord struct {
	Owner       string    `json:"owner"`
	Segment     string    `json:"segment"`
	Position    int64     `json:"position"`
	Length      int64     `json:"length"`
	FirstOffset int64     `json:"first_offset"`
	LastOffset  int64     `json:"last_offset"`
	Found       time.Time `json:"found"`
	Reason      string    `json:"reason"`
}

// mountAdmin serves the operator's reports on the HTTP listener. They name
// server paths, so they belong with /metrics, not in a protocol's answers;
// unlike /metrics they name queues and files, so with authentication on
// they need describe on the cluster, like the native API's calls.
func mountAdmin(s *server.Server, b *broker.Broker, store *auth.Store) {
	mountClusterAdmin(s, b, store)
	s.RegisterHTTP("GET "+UsersPath, api.GuardHTTP(store, auth.Describe, auth.Resource{Kind: auth.Cluster}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !store.Enabled() {
			writeJSON(w, http.StatusNotFound, AdminError{Message: "authentication is off: sluice serve has no --auth-file"})
			return
		}
		writeJSON(w, http.StatusOK, usersReport(store))
	})))
	s.RegisterHTTP("GET "+NodePath, api.GuardHTTP(store, auth.Describe, auth.Resource{Kind: auth.Cluster}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, nodeReport(s, b))
	})))
	s.RegisterHTTP("GET "+CorruptionPath, api.GuardHTTP(store, auth.Describe, auth.Resource{Kind: auth.Cluster}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rep := CorruptionReport{CorruptBatchesTotal: b.StorageStats().CorruptBatches,
			Batches: []CorruptRecord{}, Unavailable: b.UnavailableQueues()}
		for _, c := range b.Corruption() {
			rep.Batches = append(rep.Batches, CorruptRecord(c))
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	})))
}

func nodeReport(s *server.Server, b *broker.Broker) NodeReport {
	st := b.StorageStats()
	dir := s.Config().DataDir
	free, size := diskguard.DiskSpace(dir)
	r := NodeReport{DataDir: dir, DiskFreeBytes: free, DiskSizeBytes: size, OpenFiles: st.OpenFiles,
		MaxOpenFiles: st.MaxOpenFiles, Fsync: s.Metrics().Fsyncs()}
	if st.WriteFailure != nil {
		r.WriteFailure = st.WriteFailure.Error()
	}
	return r
}

func usersReport(store *auth.Store) UsersReport {
	r := UsersReport{AuthFile: store.Path(), Users: store.Users(), Rules: []RuleView{}}
	for _, rule := range store.Rules() {
		v := RuleView{User: rule.User, Label: rule.Label, Allow: []string{}, Deny: []string{}, Resources: []string{}}
		for _, op := range rule.Allow {
			v.Allow = append(v.Allow, string(op))
		}
		for _, op := range rule.Deny {
			v.Deny = append(v.Deny, string(op))
		}
		for _, p := range rule.Resources {
			v.Resources = append(v.Resources, string(p))
		}
		r.Rules = append(r.Rules, v)
	}
	return r
}
