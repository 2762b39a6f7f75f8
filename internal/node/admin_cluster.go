package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/crosssite"
	"github.com/sluice-mq/sluice/internal/server"
)

// ClusterPath answers the node's view of the cluster (broker.ClusterStatus, as JSON);
// ClusterTransferPath, posted a TransferRequest, hands a partition's leadership to
// another replica (on the partition's leader only: elsewhere 421 with the leader's id).
//
// ClusterNodesPath, posted a NodeRequest, admits a node (`sluice cluster add-node`);
// ClusterNodesPath + "/{id}", deleted, removes one (`sluice cluster remove-node`). Both
// answer once the catalog recorded the change, from any node.
//
// ClusterReassignPath, posted a ReassignRequest, moves a partition's or a queue's replicas
// (`sluice cluster reassign`), answering once the catalog holds the target, from any node.
//
// ClusterElectPath, posted an ElectRequest, makes a partition's or a queue's preferred
// replica its leader (`sluice cluster elect`), answering once it leads, from any node: 409
// if it led already, 503 if it is not in sync.
const (
	ClusterPath         = "/v1/admin/cluster"
	ClusterTransferPath = "/v1/admin/cluster/transfer-leader"
	ClusterNodesPath    = "/v1/admin/cluster/nodes"
	ClusterReassignPath = "/v1/admin/cluster/reassign"
	ClusterElectPath    = "/v1/admin/cluster/elect"
)

// ElectRequest is ClusterElectPath's body: a topic's partition, or a queue.
type ElectRequest struct {
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition,omitempty"`
	Queue     string `json:"queue,omitempty"`
}

// electTimeout bounds an election call: raft drops a transfer after an election timeout.
const electTimeout = 30 * time.Second

// ReassignRequest is ClusterReassignPath's body: a topic's partition, or a queue, and the
// replicas it is to have (the first the preferred leader), or Cancel to send a
// reassignment under way back to the replicas it had.
type ReassignRequest struct {
	Topic     string  `json:"topic,omitempty"`
	Partition int32   `json:"partition,omitempty"`
	Queue     string  `json:"queue,omitempty"`
	Replicas  []int32 `json:"replicas,omitempty"`
	Cancel    bool    `json:"cancel,omitempty"`
}

// NodeRequest is ClusterNodesPath's body: a node's id and its --cluster-addr.
type NodeRequest struct {
	ID   int32  `json:"id"`
	Addr string `json:"addr"`
}

// membershipTimeout bounds an add or remove call: a forward waits until the change (or
// the leader's refusal of it) is applied here, which a cluster with no leader never does.
const membershipTimeout = 30 * time.Second

// TransferRequest is ClusterTransferPath's body.
type TransferRequest struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	To        int32  `json:"to"`
}

// AdminError is the JSON body of an admin call that failed.
type AdminError struct {
	Message string `json:"error"`
	Leader  int32  `json:"leader,omitempty"` // for 421: the node that leads, if known
}

func (e AdminError) Error() string { return e.Message }

func mountClusterAdmin(s *server.Server, b *broker.Broker, store *auth.Store) {
	cluster := auth.Resource{Kind: auth.Cluster}
	s.RegisterHTTP("GET "+ClusterPath, api.GuardHTTP(store, auth.Describe, cluster, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st, err := b.ClusterStatus()
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})))
	s.RegisterHTTP("POST "+ClusterTransferPath, sameSiteOnly(api.GuardHTTP(store, auth.Alter, cluster, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req TransferRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, AdminError{Message: "want a JSON body {topic, partition, to}: " + err.Error()})
			return
		}
		if err := b.TransferLeader(req.Topic, req.Partition, req.To); err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, struct{}{})
	}))))
	s.RegisterHTTP("POST "+ClusterNodesPath, sameSiteOnly(api.GuardHTTP(store, auth.Alter, cluster, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req NodeRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, AdminError{Message: "want a JSON body {id, addr}: " + err.Error()})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), membershipTimeout)
		defer cancel()
		if err := b.AddNode(ctx, req.ID, req.Addr); err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	}))))
	s.RegisterHTTP("POST "+ClusterReassignPath, sameSiteOnly(api.GuardHTTP(store, auth.Alter, cluster, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req ReassignRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil || (req.Topic == "") == (req.Queue == "") ||
			req.Cancel == (len(req.Replicas) > 0) {
			msg := "want a JSON body {topic, partition, replicas} or {queue, replicas}, with cancel: true instead of replicas to cancel"
			if err != nil {
				msg += ": " + err.Error()
			}
			writeJSON(w, http.StatusBadRequest, AdminError{Message: msg})
			return
		}
		var err error
		switch {
		case req.Cancel && req.Queue != "":
			err = b.CancelQueueReassignment(req.Queue)
		case req.Cancel:
			err = b.CancelPartitionReassignment(req.Topic, req.Partition)
		case req.Queue != "":
			err = b.ReassignQueue(req.Queue, req.Replicas)
		default:
			err = b.ReassignPartition(req.Topic, req.Partition, req.Replicas, true)
		}
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, struct{}{})
	}))))
	s.RegisterHTTP("POST "+ClusterElectPath, sameSiteOnly(api.GuardHTTP(store, auth.Alter, cluster, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req ElectRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil || (req.Topic == "") == (req.Queue == "") {
			msg := "want a JSON body {topic, partition} or {queue}"
			if err != nil {
				msg += ": " + err.Error()
			}
			writeJSON(w, http.StatusBadRequest, AdminError{Message: msg})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), electTimeout)
		defer cancel()
		var err error
		if req.Queue != "" {
			err = b.ElectPreferredQueueLeader(ctx, req.Queue)
		} else {
			err = b.ElectPreferredLeader(ctx, req.Topic, req.Partition)
		}
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	}))))
	s.RegisterHTTP("DELETE "+ClusterNodesPath+"/{id}", sameSiteOnly(api.GuardHTTP(store, auth.Alter, cluster, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, AdminError{Message: "want a node id, got " + strconv.Quote(r.PathValue("id"))})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), membershipTimeout)
		defer cancel()
		if err := b.RemoveNode(ctx, int32(id)); err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	}))))
}

func writeAdminError(w http.ResponseWriter, err error) {
	var nl *broker.NotLeaderError
	var ia *broker.InvalidArgumentError
	switch {
	case errors.As(err, &nl):
		writeJSON(w, http.StatusMisdirectedRequest, AdminError{Message: err.Error(), Leader: nl.Leader})
	case errors.Is(err, broker.ErrNotClustered):
		writeJSON(w, http.StatusNotFound, AdminError{Message: err.Error()})
	case errors.Is(err, broker.ErrTopicNotFound), errors.Is(err, broker.ErrUnknownPartition), errors.Is(err, broker.ErrQueueNotFound):
		writeJSON(w, http.StatusNotFound, AdminError{Message: err.Error()})
	case errors.Is(err, broker.ErrInvalidReplicaAssignment):
		writeJSON(w, http.StatusBadRequest, AdminError{Message: err.Error()})
	case errors.Is(err, broker.ErrElectionNotNeeded), errors.Is(err, broker.ErrNoReassignmentInProgress):
		writeJSON(w, http.StatusConflict, AdminError{Message: err.Error()})
	case errors.Is(err, broker.ErrPreferredLeaderNotAvailable), errors.Is(err, broker.ErrElectionTimedOut):
		writeJSON(w, http.StatusServiceUnavailable, AdminError{Message: err.Error()})
	case errors.As(err, &ia):
		writeJSON(w, http.StatusBadRequest, AdminError{Message: err.Error()})
	case errors.Is(err, broker.ErrReplicationUnknown):
		writeJSON(w, http.StatusServiceUnavailable, AdminError{Message: err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, AdminError{Message: err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// sameSiteOnly refuses an admin call a browser sent for a page of another site
// (internal/crosssite): the endpoints decode JSON whatever the Content-Type, so a form or
// a no-cors fetch from any web page could otherwise add or remove nodes, reassign or
// elect on a cluster whose listener is loopback without --auth-file. The CLI sends
// neither header a browser sets.
func sameSiteOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := crosssite.Why(r); why != "" {
			writeJSON(w, http.StatusForbidden, AdminError{Message: "a web page of another site may not call the admin API (" + why + ")"})
			return
		}
		h.ServeHTTP(w, r)
	})
}
