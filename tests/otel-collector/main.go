// The OpenTelemetry Collector, built with only what the tracing tests of `kube-descheduler run`
// need: the Collector's own OTLP receiver and OTLP/gRPC exporter (go.opentelemetry.io/collector,
// as its builder would generate for these two components). The tests run it between `run` and
// tests/otel-receiver, which prints what the Collector forwards. Run with --config=<file>.
package main

import (
	"log"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	r := otlpreceiver.NewFactory()
	e := otlpexporter.NewFactory()
	return otelcol.Factories{
		Receivers: map[component.Type]receiver.Factory{r.Type(): r},
		Exporters: map[component.Type]exporter.Factory{e.Type(): e},
		Telemetry: otelconftelemetry.NewFactory(),
	}, nil
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol-test", Description: "OTLP receiver for tests", Version: "test"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		log.Fatal(err)
	}
}
