package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/bootstrap"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// stdin is where `otad users create` reads a password; tests replace it.
var stdin io.Reader = os.Stdin

const usersSynopsis = `otad users create --username NAME --role ROLE   (the database is OTA_DATABASE_URL's)
  the password is OTA_NEW_USER_PASSWORD, or else the first line of stdin; it is never printed
  roles: viewer, releaser, rollout_manager, device_admin, admin (docs/DOMAIN.md)`

// users manages operators' accounts from the command line: the first
// admin is made here, acting as the break-glass root, before anyone can
// sign in. It applies pending migrations first, as serve does.
func users(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprintf(stdout, "usage: %s\n", usersSynopsis)
			return flag.ErrHelp
		}
		return refuse(stderr, usersSynopsis, "users needs the subcommand create")
	}
	fs := flag.NewFlagSet("users create", flag.ContinueOnError)
	username := fs.String("username", "", "the account's name: 1-64 of [a-z0-9._-]")
	role := fs.String("role", "", "viewer, releaser, rollout_manager, device_admin or admin")
	if err := parseFlags(fs, usersSynopsis, args[1:], stdout, stderr); err != nil {
		return err
	}
	if *username == "" || *role == "" || fs.NArg() != 0 {
		return refuse(stderr, usersSynopsis, "users create needs --username and --role")
	}
	// The flags are judged before anything connects or migrates.
	if _, err := domain.ParsePasswordUsername(*username); err != nil {
		return refuse(stderr, usersSynopsis, "users create: --username: %v", err)
	}
	if _, err := domain.ParseRole(*role); err != nil {
		return refuse(stderr, usersSynopsis, "users create: --role: %v", err)
	}
	password := getenv("OTA_NEW_USER_PASSWORD")
	if password == "" {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading the password from stdin: %w", err)
		}
		password = strings.TrimRight(line, "\r\n")
	}
	if password == "" {
		return errors.New("users create: no password: set OTA_NEW_USER_PASSWORD or write it on stdin")
	}
	db, closeDB, err := openMaintenanceDB(getenv)
	if err != nil {
		return err
	}
	defer closeDB()
	if err := bootstrap.Migrate(ctx, db.DB, bootstrap.MigrateUp, io.Discard); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	accounts, err := application.NewAccounts(postgres.NewAccountRepository(db), local.NewClock(), local.NewUUIDs(), "")
	if err != nil {
		return err
	}
	// The server's own shell acts as the root; the record says so.
	actor, err := domain.NewActor(domain.RootPrincipal(), "", "otad users create")
	if err != nil {
		return err
	}
	u, err := accounts.CreateUser(ctx, actor, ports.NewUser{Username: *username, Role: *role, Password: password})
	if err != nil {
		return fmt.Errorf("users create: %w", err)
	}
	fmt.Fprintf(stdout, "created user %s (role %s)\n", u.Name(), u.Role())
	return nil
}
