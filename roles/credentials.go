package roles

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/control"
	"plaita/internal/keyring"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
)

// DefaultCredentialsKeyFile is the key file's name when PLAITA_CREDENTIALS_KEY_FILE is unset.
const DefaultCredentialsKeyFile = "plaita_credentials.key"

// credentialsKeyFile is where the master key file is: PLAITA_CREDENTIALS_KEY_FILE, else beside
// the console's SQLite database (PLAITA_CONSOLE_DB_URL), else in the working directory (a
// PostgreSQL or in-memory console database: the runbook's rule, said in a WARNING at the
// console's start — see credentialsKeyWarning).
func credentialsKeyFile(cfg *config.Config) string {
	if p := config.CredentialsKeyFile.In(cfg); p != "" {
		return p
	}
	if loc, err := sqlite.ParseURL(config.ConsoleDBURL.In(cfg)); err == nil && loc.Path != "" {
		return filepath.Join(filepath.Dir(loc.Path), DefaultCredentialsKeyFile)
	}
	return DefaultCredentialsKeyFile
}

// credentialsKey is the master key source of a process configured by cfg (docs/credentials.md):
// PLAITA_CREDENTIALS_KEY when set (it wins), else the key file (credentialsKeyFile), read at
// every use so that a replaced file takes effect without a restart. create: the process makes
// the file when there is none (the console: O_EXCL, 0600); any other fails closed without it.
// A file with a looser mode is tightened to 0600, said once in a WARNING.
func credentialsKey(cfg *config.Config, create bool, log zerolog.Logger) control.KeySource {
	inline := config.CredentialsKey.In(cfg)
	path := credentialsKeyFile(cfg)
	var once sync.Map // what was said: "created", "tightened"
	// The file is read again when it changed (its size, time or mode): local mode seals every
	// state write, and a stat is what each of those costs.
	var mu sync.Mutex
	var cached keyring.Ring
	var seen os.FileInfo
	return func() (keyring.Ring, error) {
		if inline != "" {
			return keyring.ParseRing(inline)
		}
		mu.Lock()
		defer mu.Unlock()
		if info, err := os.Stat(path); err == nil && seen != nil && info.Size() == seen.Size() && info.ModTime().Equal(seen.ModTime()) &&
			info.Mode() == seen.Mode() {
			return cached, nil
		}
		k, res, err := keyring.LoadFile(path, create)
		if err != nil {
			seen = nil
			return keyring.Ring{}, err
		}
		if res.Created {
			if _, said := once.LoadOrStore("created", true); !said {
				log.Warn().Str("event", "credentials.key_created").Str("path", path).Str("key_id", k.Current.ID()).
					Msg("a new credentials key was created (mode 0600): back it up apart from the database, and give the workers the same key")
			}
		}
		if res.Tightened != 0 {
			if _, said := once.LoadOrStore("tightened", true); !said {
				log.Warn().Str("event", "credentials.key_mode_tightened").Str("path", path).Str("was", res.Tightened.String()).
					Msg("the credentials key file was readable by others: its mode is 0600 now")
			}
		}
		if info, err := os.Stat(path); err == nil {
			cached, seen = k, info
		}
		return k, nil
	}
}

// credentials are the credentials over backend b, sealed under the keys of key.
func credentials(b Backend, key control.KeySource) *control.Credentials {
	return control.NewCredentials(store.NewCredentials(b.Credentials, keys.DefaultRoot), key)
}

// Credentials are the credentials over the Redis of client c, as the CLI uses them: the key
// file is read, never created (the console creates it).
func Credentials(cfg *config.Config, c rueidis.Client, log zerolog.Logger) *control.Credentials {
	return credentials(RedisBackend(c), credentialsKey(cfg, false, log))
}

// CredentialTenants are the tenants whose credentials a rotation goes through: the default one
// and every tenant whose status the console published to the Redis of c (every tenant it has,
// deleted ones included: they stay disabled there).
func CredentialTenants(ctx context.Context, c rueidis.Client) ([]string, error) {
	sp, err := keys.For(keys.DefaultRoot, "")
	if err != nil {
		return nil, err
	}
	published, err := store.RedisDrivers(c).Tenants.StatusTenants(ctx, sp)
	if err != nil {
		return nil, err
	}
	out := []string{keys.DefaultTenant}
	for _, t := range published {
		if t != keys.DefaultTenant {
			out = append(out, t)
		}
	}
	return out, nil
}
