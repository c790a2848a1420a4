package bootstrap

import (
	"log/slog"
	"strings"

	"github.com/google/wire"

	"github.com/ai-device/ota/adapters/console"
	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/ports"
)

// fleetSet provides the fleet views (the admin API's listings and the
// console's overview) on whatever application.FleetReader the store set binds.
var fleetSet = wire.NewSet(
	application.NewFleet, wire.Bind(new(ports.FleetService), new(*application.Fleet)),
)

// postgresFleetSet reads the fleet views from Postgres. They are read
// straight from the tables, not through the catalog cache: an operator
// wants the counts as they are.
var postgresFleetSet = wire.NewSet(
	postgres.NewFleetReader, wire.Bind(new(application.FleetReader), new(*postgres.FleetReader)),
)

// memoryFleetSet reads the fleet views from the in-process store.
var memoryFleetSet = wire.NewSet(
	memory.NewFleet, wire.Bind(new(application.FleetReader), new(*memory.Fleet)),
)

// consoleSet provides the operator console and mounts it, with the fleet
// views, on the HTTP server.
var consoleSet = wire.NewSet(NewSignInLimiter, NewConsole, HTTPOptions)

// SignInLimiter is the budget of sign-in attempts (docs/DOMAIN.md S5), in
// process and per replica as the devices' budget is: one limiter, which
// the console's sign-in and the API's password route both spend.
type SignInLimiter struct{ ports.RateLimiter }

// NewSignInLimiter is OTA_CONSOLE_SIGNIN_RATE_LIMIT / _BURST's budget, or
// none when the rate is 0.
func NewSignInLimiter(cfg Config) SignInLimiter {
	if cfg.SignInRate > 0 {
		return SignInLimiter{local.NewRateLimiter(cfg.SignInRate, cfg.SignInBurst)}
	}
	return SignInLimiter{ports.Unlimited{}}
}

// NewConsole builds the operator console; it signs operators in with
// their password (accounts), at the identity provider when OTA_OIDC_* is
// set (discovered now: a provider that does not answer fails the start),
// or with the admin token, budgets sign-in attempts
// per address and username (in-process, per replica, as the devices'
// budget), uploads images through the same use case as the API, and shows
// the audit log to those who may read it, and manages webhooks.
func NewConsole(cfg Config, limiter SignInLimiter, admin ports.AdminService, fleet ports.FleetService, artifacts ports.ArtifactService,
	accounts ports.AccountService, audit ports.AuditService, webhooks ports.WebhookService, clock ports.Clock, logger *slog.Logger) (*console.Console, error) {
	opts := []console.Option{console.WithArtifacts(artifacts), console.WithAccounts(accounts), console.WithAudit(audit),
		console.WithWebhooks(webhooks)}
	sso, err := newOIDC(cfg)
	if err != nil {
		return nil, err
	}
	if sso != nil {
		opts = append(opts, console.WithOIDC(sso))
	}
	return console.New(console.Config{AdminToken: cfg.AdminToken, SessionKey: cfg.ConsoleSessionKey,
		SecureCookies: strings.HasPrefix(cfg.PublicURL, "https://"), SignInLimiter: limiter.RateLimiter},
		admin, fleet, clock, logger, opts...)
}

// HTTPOptions adds the fleet views, the artifact routes, operators'
// accounts, the audit log and webhook subscriptions to the admin API, serves the console at
// /console/ on the same server, and the devices' downloads of hosted
// artifacts.
func HTTPOptions(cfg Config, limiter SignInLimiter, fleet ports.FleetService, artifacts ports.ArtifactService, con *console.Console, dl ports.DownloadService,
	accounts ports.AccountService, audit ports.AuditService, webhooks ports.WebhookService) []rest.Option {
	return []rest.Option{rest.WithFleet(fleet), rest.WithArtifacts(artifacts), rest.WithMount(console.Prefix, con),
		rest.WithDownloads(dl, cfg.PublicURL), rest.WithAccounts(accounts), rest.WithSignInLimiter(limiter.RateLimiter), rest.WithAudit(audit), rest.WithWebhooks(webhooks)}
}
