package roles

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/internal/tracing"
)

// tracingFlushBudget bounds the flush of the last spans when a role stops.
const tracingFlushBudget = 5 * time.Second

// tracingSettings are the process's tracing settings as the configuration gives them (the
// standard OTEL_* variables; docs/tracing.md).
func tracingSettings(cfg *config.Config) tracing.Settings {
	headers, _ := config.ParseOTLPHeaders(config.OtelExporterOtlpHeaders.In(cfg)) // preflight refused a bad value
	return tracing.Settings{
		Endpoint: config.OtelExporterOtlpEndpoint.In(cfg), TracesEndpoint: config.OtelExporterOtlpTracesEndpoint.In(cfg),
		Protocol: config.OtelExporterOtlpProtocol.In(cfg), Headers: headers, ServiceName: config.OtelServiceName.In(cfg),
		Sampler: config.OtelTracesSampler.In(cfg), SamplerArg: config.OtelTracesSamplerArg.In(cfg),
		BatchDelay: time.Duration(config.OtelBspScheduleDelay.In(cfg)) * time.Millisecond,
		Disabled:   config.OtelSdkDisabled.In(cfg), Role: string(cfg.Role()), Instance: config.InstanceID.In(cfg),
	}
}

// StartTracing turns tracing on for the process when the configuration names an OTLP endpoint
// (a no-op otherwise) and returns what flushes and stops it when the role ends.
func StartTracing(ctx context.Context, cfg *config.Config, log zerolog.Logger) (stop func(), err error) {
	return startTracing(ctx, tracingSettings(cfg), log)
}

// StartCLITracing is StartTracing for an operator command (plaita start, event publish,
// resume …): its spans are service plaita-cli unless OTEL_SERVICE_NAME says otherwise.
func StartCLITracing(ctx context.Context, cfg *config.Config, log zerolog.Logger) (stop func(), err error) {
	s := tracingSettings(cfg)
	s.Role = "cli"
	if !cfg.IsSet("OTEL_SERVICE_NAME") {
		s.ServiceName = "plaita-cli"
	}
	return startTracing(ctx, s, log)
}

func startTracing(ctx context.Context, s tracing.Settings, log zerolog.Logger) (stop func(), err error) {
	s.OnError = func(err error) {
		log.Warn().Err(err).Str("event", "tracing.error").Msg("tracing: spans not sent (the work goes on; they are dropped)")
	}
	shutdown, err := tracing.Setup(ctx, s)
	if err != nil {
		return func() {}, fmt.Errorf("tracing (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	if !s.On() {
		return func() {}, nil
	}
	url, _ := s.URL()
	log.Info().Str("event", "tracing.on").Str("endpoint", config.MaskURL(url)).Str("protocol", s.Protocol).
		Str("service_name", s.ServiceName).Str("sampler", s.Sampler).Msg("tracing: spans are sent over OTLP")
	return func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlushBudget)
		defer cancel()
		if err := shutdown(fctx); err != nil {
			log.Warn().Err(err).Str("event", "tracing.flush_failed").Msg("the last spans could not be sent")
		}
	}, nil
}
