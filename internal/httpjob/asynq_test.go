package httpjob

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// quietLogger keeps asynq's server from logging to the test output.
type quietLogger struct{}

func (quietLogger) Debug(...any) {}
func (quietLogger) Info(...any)  {}
func (quietLogger) Warn(...any)  {}
func (quietLogger) Error(...any) {}
func (quietLogger) Fatal(...any) {}

// Run by a real asynq server, a job that cannot succeed is archived at once
// with its reason, whatever retries it had left, and a good one completes.
func TestHandlerUnderAsynq(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	const queueName = "httpjob"

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = io.WriteString(w, "done")
		default:
			http.Error(w, "no such thing", http.StatusNotFound)
		}
	}))
	defer api.Close()

	ac := asynq.NewClientFromRedisClient(rdb)
	enqueue := func(id string, payload []byte) {
		_, err := ac.Enqueue(asynq.NewTask(TaskType, payload), asynq.Queue(queueName), asynq.TaskID(id),
			asynq.MaxRetry(5), asynq.Retention(time.Hour))
		require.NoError(t, err)
	}
	enqueue("ok", task(t, Request{URL: api.URL + "/ok"}).Payload())
	enqueue("missing", task(t, Request{URL: api.URL + "/missing"}).Payload())
	enqueue("bad", []byte(`{"url": "gopher://h/"}`))

	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:       2,
		Queues:            map[string]int{queueName: 1},
		TaskCheckInterval: 50 * time.Millisecond,
		Logger:            quietLogger{},
	})
	mux := asynq.NewServeMux()
	mux.Handle(TaskType, &Handler{})
	require.NoError(t, srv.Start(mux))
	defer srv.Shutdown()

	insp := asynq.NewInspectorFromRedisClient(rdb)
	var archived, completed []*asynq.TaskInfo
	require.Eventually(t, func() bool {
		var err error
		archived, err = insp.ListArchivedTasks(queueName)
		require.NoError(t, err)
		completed, err = insp.ListCompletedTasks(queueName)
		require.NoError(t, err)
		return len(archived) == 2 && len(completed) == 1
	}, 10*time.Second, 20*time.Millisecond)

	sort.Slice(archived, func(i, j int) bool { return archived[i].ID < archived[j].ID })
	assert.Equal(t, "bad", archived[0].ID)
	assert.Equal(t, `http:request: bad payload: url gopher://h/: scheme "gopher" is not http or https: skip retry for the task`, archived[0].LastErr)
	assert.Equal(t, 0, archived[0].Retried)
	assert.Equal(t, "missing", archived[1].ID)
	assert.Equal(t, `http:request: GET `+api.URL+`/missing answered 404 Not Found: "no such thing": skip retry for the task`, archived[1].LastErr)
	assert.Equal(t, 0, archived[1].Retried)
	assert.Equal(t, "ok", completed[0].ID)

}
