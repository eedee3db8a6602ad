package api

import (
	"context"

	"plaita/control"
)

// One instance of the cluster asked over its control channel (control/ctl.go), as `plaita ctl
// status|stop` asks it: its status, or a drain — which always means a drain, as SIGTERM does:
// the instance stops taking work, finishes (or leaves for redelivery) what it runs, and exits.
// Platform admins only: every tenant's work runs on these instances.

type instanceIn struct {
	ID string `path:"id" minLength:"1" maxLength:"200" doc:"the instance id, as GET /api/cluster/instances lists it"`
}

type instanceOut struct{ Body control.InstanceAnswer }

// instanceStatus asks the instance for its status: role, status, draining, uptime and, for a
// worker, its tasks in flight. An unknown instance is a 404, one that does not answer in time a
// 503.
func (a *API) instanceStatus(ctx context.Context, c *Call, in *instanceIn) (*instanceOut, error) {
	ans, err := a.d.Plane.InstanceStatus(ctx, control.InstanceRequest{ID: in.ID, From: "console:" + c.Principal.Actor})
	return &instanceOut{Body: ans}, err
}

// drainInstance asks the instance to drain and exit; the audit row names it and what it
// answered.
func (a *API) drainInstance(ctx context.Context, c *Call, in *instanceIn) (*instanceOut, error) {
	c.Audit.Target = in.ID
	ans, err := a.d.Plane.StopInstance(ctx, control.InstanceRequest{ID: in.ID, From: "console:" + c.Principal.Actor})
	if err != nil {
		return nil, err
	}
	c.Note("role", ans.Role)
	c.Note("status", ans.Status)
	c.Note("host", ans.Host)
	return &instanceOut{Body: ans}, nil
}
