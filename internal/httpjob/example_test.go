package httpjob_test

import (
	"encoding/json"
	"fmt"
	"log"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/httpjob"
)

// Build a payload from a Request, and register the Handler for the task type.
func Example() {
	payload, err := json.Marshal(httpjob.Request{
		URL:     "https://hooks.example.com/notify",
		Method:  "POST",
		Headers: map[string]string{"Content-Type": "application/json"},
		Body:    `{"event": "signup"}`,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(payload))

	mux := asynq.NewServeMux()
	mux.Handle(httpjob.TaskType, &httpjob.Handler{})
	// Output:
	// {"url":"https://hooks.example.com/notify","method":"POST","headers":{"Content-Type":"application/json"},"body":"{\"event\": \"signup\"}"}
}

func ExampleParseRequest() {
	r, err := httpjob.ParseRequest([]byte(`{"url": "https://api.example.com/v1/users/42"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Method, r.URL)

	_, err = httpjob.ParseRequest([]byte(`{"url": "ftp://files.example.com/x"}`))
	fmt.Println(err)
	// Output:
	// GET https://api.example.com/v1/users/42
	// httpjob: bad request: url ftp://files.example.com/x: scheme "ftp" is not http or https
}
