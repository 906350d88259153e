package main

import (
	"context"
	"net/url"
	"sort"
	"strings"

	"github.com/hibiken/asynq"
)

// maxArchived is how many archived jobs the dashboard and sluice inspect
// TYPE list: the latest.
const maxArchived = 20

// archivedScan is how many archived jobs of a member queue are read to find
// one type's latest (sluice inspect TYPE), at most.
const archivedScan = 100

// archivedOf lists the latest archived jobs (of type typ; of any type when
// typ is "") over the queues qs, read by f.queues, newest first, at most
// maxArchived, each with asynq's last error as its reason and, when
// asynqmon is the address of an asynqmon (--asynqmon), a link to its page
// of the job. Only the members of a queue's family that hold archived jobs
// are read (counted in one pipeline, for a queue whose family has any), a
// page each, with asynq's Inspector; a member that cannot be
// read is left out, with its error.
func (f *fleet) archivedOf(qs []queueView, typ, asynqmon string) ([]archivedView, []error) {
	page := maxArchived
	if typ != "" {
		page = archivedScan
	}
	out := []archivedView{}
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	for _, q := range qs {
		if q.Archived == 0 {
			continue
		}
		in, err := f.membersWith(ctx, q.Name, "archived")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for member, n := range in {
			ts, err := f.insp.ListArchivedTasks(member, asynq.PageSize(min(page, n)))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, t := range ts {
				if typ != "" && t.Type != typ {
					continue
				}
				out = append(out, archivedView{ID: t.ID, Queue: q.Name, Type: t.Type, Reason: t.LastErr,
					FailedAt: t.LastFailedAt.UTC(), Link: asynqmonLink(asynqmon, member, t.ID)})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].FailedAt.Equal(out[j].FailedAt) {
			return out[i].FailedAt.After(out[j].FailedAt)
		}
		return out[i].ID < out[j].ID
	})
	if len(out) > maxArchived {
		out = out[:maxArchived]
	}
	return out, errs
}

// asynqmonLink is asynqmon's page of job id in queue (a member's asynq
// name), under base, asynqmon's address with its root path
// (http://host:8080, or http://host/monitoring behind a prefix): asynqmon
// routes /queues/:qname/tasks/:taskId (ui/src/paths.ts, TASK_DETAILS). ""
// without a base.
func asynqmonLink(base, queue, id string) string {
	if base == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/queues/" + url.PathEscape(queue) + "/tasks/" + url.PathEscape(id)
}
