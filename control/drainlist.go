package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"plaita/queue"
)

// DrainList moves a legacy Redis List queue into the task stream (docs/operations.md
// "drain-list"): each item is sent once even when the drain is killed and run again
// (queue/listdrain.go says how), in the List's order, a batch per round trip. An item that
// cannot become a task is set aside on <list>:drain:rejected, never dropped.

// DefaultDrainBatch is how many items one round trip moves.
const DefaultDrainBatch = 100

// maxRejectedShown bounds the rejected items a report names (the rejected list has them all).
const maxRejectedShown = 20

// DrainListRequest is one drain.
type DrainListRequest struct {
	List   string // the legacy List's key
	Batch  int    // items per round trip (< 1: DefaultDrainBatch)
	DryRun bool   // read and decode only: what a drain would send and set aside
	// Progress, when set, is called after every batch.
	Progress func(DrainListProgress)
}

// DrainListProgress is how far a drain is.
type DrainListProgress struct {
	Sent        int   `json:"sent"`
	AlreadySent int   `json:"already_sent"`
	Rejected    int   `json:"rejected"`
	Remaining   int64 `json:"remaining"` // items left on the List when the drain started, minus those read since
}

// DrainListReject is one item set aside, and why.
type DrainListReject struct {
	Digest string `json:"digest"`
	Reason string `json:"reason"`
}

// DrainListReport is what a drain did (or, dry, would do).
type DrainListReport struct {
	List           string `json:"list"`
	ProcessingList string `json:"processing_list"`
	RejectedList   string `json:"rejected_list"`
	Stream         string `json:"stream"`
	DryRun         bool   `json:"dry_run"`
	// Before is what the drain found; After what it left (a dry run: the same).
	Before queue.ListState `json:"before"`
	After  queue.ListState `json:"after"`
	DrainListProgress
	Starts  int `json:"starts"`
	Resumes int `json:"resumes"`
	// DerivedIDs are the starts without an execution id that got a deterministic one.
	DerivedIDs    int               `json:"derived_execution_ids"`
	RejectedItems []DrainListReject `json:"rejected_items,omitempty"`
	Elapsed       time.Duration     `json:"elapsed_ns"`
}

// Drained reports whether nothing is left to look at: the List and the processing list are
// empty and no item waits on the rejected list.
func (r DrainListReport) Drained() bool {
	return r.After.Length == 0 && r.After.Processing == 0 && r.After.Rejected == 0
}

// DrainList runs one drain into the queue's stream.
func (p *Plane) DrainList(ctx context.Context, req DrainListRequest) (DrainListReport, error) {
	began := p.now()
	d, err := p.d.Queue.ListDrain(req.List)
	if err != nil {
		return DrainListReport{}, refuse(Invalid, "invalid_list", err, "%v", err)
	}
	rep := DrainListReport{DryRun: req.DryRun}
	rep.List, rep.ProcessingList, rep.RejectedList, rep.Stream = d.Keys()
	if rep.Before, err = d.State(ctx); err != nil {
		return rep, drainRefusal(err)
	}
	batch := req.Batch
	if batch < 1 {
		batch = DefaultDrainBatch
	}
	rep.Remaining = rep.Before.Length
	if req.DryRun {
		err = p.drainDry(ctx, d, batch, &rep, req.Progress)
	} else {
		err = p.drainRun(ctx, d, batch, &rep, req.Progress)
	}
	rep.Elapsed = p.now().Sub(began)
	if err != nil {
		return rep, err
	}
	if rep.After, err = d.State(ctx); err != nil {
		return rep, drainRefusal(err)
	}
	return rep, nil
}

func drainRefusal(err error) error {
	if errors.Is(err, queue.ErrListDrain) {
		return refuse(Conflict, "list_drain_refused", err, "%v", err)
	}
	return err
}

// drainRun sends batch after batch until the List is empty: each batch is taken (LMOVE to the
// processing list), sent (marker script), and removed from the processing list.
func (p *Plane) drainRun(ctx context.Context, d *queue.ListDrain, batch int, rep *DrainListReport, progress func(DrainListProgress)) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted (run it again: what was taken is finished first): %w", err)
		}
		raws, err := d.Take(ctx, batch)
		if err != nil {
			return err
		}
		if len(raws) == 0 {
			return nil
		}
		var good []queue.ListItem
		var goodRaws []string
		for _, raw := range raws {
			it := d.Read(raw)
			if it.Err != nil {
				if err := d.Reject(ctx, raw); err != nil {
					return err
				}
				rep.reject(it)
				continue
			}
			good, goodRaws = append(good, it), append(goodRaws, raw)
		}
		sent, err := d.Send(ctx, good)
		if err != nil {
			return err
		}
		for i, s := range sent {
			rep.count(good[i], s.Already)
		}
		if err := d.Done(ctx, goodRaws); err != nil {
			return err
		}
		rep.Remaining = max(rep.Remaining-int64(len(raws)), 0)
		if progress != nil {
			progress(rep.DrainListProgress)
		}
	}
}

// drainDry reads the processing list and the List page by page and counts what a drain would
// do; it writes nothing.
func (p *Plane) drainDry(ctx context.Context, d *queue.ListDrain, batch int, rep *DrainListReport, progress func(DrainListProgress)) error {
	held, err := d.Held(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{} // a byte-identical item later in the List finds the earlier one's marker
	look := func(raws []string) error {
		var good []queue.ListItem
		for _, raw := range raws {
			if it := d.Read(raw); it.Err != nil {
				rep.reject(it)
			} else {
				good = append(good, it)
			}
		}
		marked, err := d.AlreadySent(ctx, good)
		if err != nil {
			return err
		}
		for i, it := range good {
			rep.count(it, marked[i] || seen[it.Digest])
			seen[it.Digest] = true
		}
		return nil
	}
	if err := look(held); err != nil {
		return err
	}
	for start := int64(0); start < rep.Before.Length; start += int64(batch) {
		if err := ctx.Err(); err != nil {
			return err
		}
		raws, err := d.Peek(ctx, start, batch)
		if err != nil {
			return err
		}
		if len(raws) == 0 {
			break
		}
		if err := look(raws); err != nil {
			return err
		}
		rep.Remaining = max(rep.Remaining-int64(len(raws)), 0)
		if progress != nil {
			progress(rep.DrainListProgress)
		}
	}
	return nil
}

func (r *DrainListReport) count(it queue.ListItem, already bool) {
	if already {
		r.AlreadySent++
		return
	}
	r.Sent++
	if it.Envelope.Kind == queue.KindStart {
		r.Starts++
	} else {
		r.Resumes++
	}
	if it.Derived {
		r.DerivedIDs++
	}
}

func (r *DrainListReport) reject(it queue.ListItem) {
	r.Rejected++
	if len(r.RejectedItems) < maxRejectedShown {
		r.RejectedItems = append(r.RejectedItems, DrainListReject{Digest: it.Digest, Reason: it.Err.Error()})
	}
}
