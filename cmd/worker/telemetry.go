package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// serviceName is the service.name of the worker's telemetry.
const serviceName = "sluice-worker"

// metricsReadHeaderTimeout bounds how long a scrape may take to send its
// request headers.
const metricsReadHeaderTimeout = 5 * time.Second

// metrics is the HTTP server that serves the Prometheus registry on /metrics
// and the worker's health on /healthz.
type metrics struct {
	srv     *http.Server
	ln      net.Listener
	healthy atomic.Bool   // /healthz: 200 while the pool runs, 503 before and while stopping
	serving bool          // serve was called
	served  chan struct{} // closed when Serve has returned
}

// listenMetrics listens on addr and sets up the handlers; serve starts
// answering. It returns the reader that feeds the registry from the worker's
// MeterProvider. Series carry no otel_scope_* labels: one scope per package
// is noise in every query.
func listenMetrics(addr string, log *slog.Logger) (*metrics, sdkmetric.Reader, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot serve metrics on --metrics-addr %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	m := &metrics{ln: ln, served: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}))
	mux.HandleFunc("GET /healthz", m.health)
	m.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: metricsReadHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return m, exp, nil
}

// resourceOf is the OTel resource of the worker's telemetry: service.name
// sluice-worker, the SDK's attributes, and OTEL_RESOURCE_ATTRIBUTES /
// OTEL_SERVICE_NAME, which win.
func resourceOf() *resource.Resource {
	res, err := resource.New(context.Background(),
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil { // a malformed OTEL_RESOURCE_ATTRIBUTES: keep what parsed
		otel.Handle(err)
	}
	return res
}

func (m *metrics) health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !m.healthy.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "stopping")
		return
	}
	io.WriteString(w, "ok")
}

// serve answers requests until shutdown, in a goroutine of its own; /healthz
// answers 503 until setHealthy(true).
func (m *metrics) serve(log *slog.Logger) {
	log.Info("serving metrics", "addr", m.ln.Addr().String())
	m.serving = true
	go func() {
		defer close(m.served)
		if err := m.srv.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
}

// setHealthy sets what /healthz answers.
func (m *metrics) setHealthy(ok bool) {
	if m != nil {
		m.healthy.Store(ok)
	}
}

// shutdown stops the server, letting scrapes in progress finish within ctx. It is safe on a nil m; it must not run at the same
// time as serve.
func (m *metrics) shutdown(ctx context.Context) {
	if m == nil {
		return
	}
	if err := m.srv.Shutdown(ctx); err != nil {
		m.srv.Close()
	}
	if m.serving {
		<-m.served
	} else {
		m.ln.Close()
	}
}
