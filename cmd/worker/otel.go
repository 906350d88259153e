package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sluicehq/sluice/internal/cli"
)

// telemetry is where the worker's metrics and spans go: Prometheus on
// --metrics-addr, and OTLP over HTTP when the standard OTEL_* variables name
// an endpoint. With neither, both providers are no-ops.
type telemetry struct {
	web *metrics // the /metrics and /healthz server; nil without --metrics-addr
	mp  *sdkmetric.MeterProvider
	tp  *sdktrace.TracerProvider
	// what is on, for the start-up line
	otlpMetrics, otlpTraces bool
}

// otlpEnabled says whether OTLP export of signal ("TRACES" or "METRICS") is
// asked for: an endpoint in OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT, not turned off by
// OTEL_<SIGNAL>_EXPORTER=none or OTEL_SDK_DISABLED=true. Only the
// http/protobuf protocol is built in; another is a usage error.
func otlpEnabled(signal string, getenv func(string) string) (bool, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	if exp := getenv("OTEL_" + signal + "_EXPORTER"); exp != "" && exp != "otlp" {
		if exp == "none" {
			return false, nil
		}
		return false, cli.Usagef("OTEL_%s_EXPORTER=%q: this worker exports otlp (or none)", signal, exp)
	}
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") == "" {
		return false, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(name); p != "" {
			if p != "http/protobuf" {
				return false, cli.Usagef("%s=%q: this worker speaks OTLP over http/protobuf only", name, p)
			}
			break
		}
	}
	return true, nil
}

// checkTelemetryEnv reports a bad OTEL_* setting before anything starts.
func checkTelemetryEnv() error {
	if _, err := otlpEnabled("TRACES", os.Getenv); err != nil {
		return err
	}
	_, err := otlpEnabled("METRICS", os.Getenv)
	return err
}

// startTelemetry sets up the providers: a MeterProvider with a Prometheus
// reader (if --metrics-addr) and an OTLP one (if asked for), and a
// TracerProvider exporting to OTLP (if asked for). It makes them the global
// providers, and otel's errors warnings in log. The exporters read the rest of
// their settings (headers, timeouts, TLS) from the OTEL_* variables.
func startTelemetry(ctx context.Context, c config, log *slog.Logger) (*telemetry, error) {
	t := &telemetry{}
	var readers []sdkmetric.Option
	if c.metricsAddr != "" {
		web, reader, err := listenMetrics(c.metricsAddr, log)
		if err != nil {
			return nil, err
		}
		t.web = web
		readers = append(readers, sdkmetric.WithReader(reader))
	}
	var err error
	if t.otlpMetrics, err = otlpEnabled("METRICS", os.Getenv); err != nil {
		return nil, err
	}
	if t.otlpMetrics {
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			t.shutdown(ctx)
			return nil, fmt.Errorf("OTLP metrics exporter: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if t.otlpTraces, err = otlpEnabled("TRACES", os.Getenv); err != nil {
		t.shutdown(ctx)
		return nil, err
	}
	if t.otlpTraces {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			t.shutdown(ctx)
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(resourceOf()))
		otel.SetTracerProvider(t.tp)
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	}
	if len(readers) > 0 {
		t.mp = sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(resourceOf()))...)
		otel.SetMeterProvider(t.mp)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry", "err", err) }))
	return t, nil
}

// meterProvider is where the worker's metrics go; a no-op when none is on.
func (t *telemetry) meterProvider() metric.MeterProvider {
	if t == nil || t.mp == nil {
		return noop.NewMeterProvider()
	}
	return t.mp
}

// tracerProvider is where the worker's spans go; a no-op without OTLP.
func (t *telemetry) tracerProvider() trace.TracerProvider {
	if t == nil || t.tp == nil {
		return tracenoop.NewTracerProvider()
	}
	return t.tp
}

// shutdown stops the metrics server and flushes the exporters within ctx. It
// is safe on a nil t.
func (t *telemetry) shutdown(ctx context.Context) {
	if t == nil {
		return
	}
	t.web.shutdown(ctx)
	if t.mp != nil {
		_ = t.mp.Shutdown(ctx)
	}
	if t.tp != nil {
		_ = t.tp.Shutdown(ctx)
	}
}
