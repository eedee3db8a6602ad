package control

import (
	"context"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

// Operations are the operations both modes of the console offer: over Redis and the roles
// (Plane), and in the console's own process when Redis was unreachable at its start (Local).
// The console's API calls them through this interface, so a route means the same in both
// modes; what only Plane has (dead letters, schedules, the cluster …) is called on a Plane.
type Operations interface {
	Tenant(tenant string) (string, error)
	QueueName() string

	ParseFlow(def []byte) (*engine.Flow, error)
	PublishFlow(ctx context.Context, tenant string, def []byte, version string) (Published, error)
	FlowPage(ctx context.Context, tenant, cursor string, limit int) (store.FlowPage, error)
	Flow(ctx context.Context, tenant, flowID, version string) (FlowShown, error)

	Start(ctx context.Context, req StartRequest) (Started, error)
	Show(ctx context.Context, tenant, id string) (Shown, error)
	List(ctx context.Context, tenant string, req ListRequest) (store.Page, error)
	Resume(ctx context.Context, req ResumeRequest) (Done, error)
	Cancel(ctx context.Context, tenant, id string) (Done, error)
	Delete(ctx context.Context, tenant, id string, force bool) (Done, error)
	Detail(ctx context.Context, tenant string, st *state.Execution) Detail
	Timeline(ctx context.Context, tenant, id string, after, limit int) (TimelinePage, error)
	Follow(ctx context.Context, req FollowRequest, emit func(LiveItem) error) error

	Approvals(ctx context.Context, tenant, cursor string, limit int) (store.ApprovalPage, error)
	AnswerApproval(ctx context.Context, a Answer) (Done, error)
	PublishEvent(ctx context.Context, ev store.Event) (EventPublished, error)
}
