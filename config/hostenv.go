package config

import (
	"os"
	"strings"
)

// HostEnv reads a variable of the host environment that is not plaita configuration: PATH,
// LANG, TZ, HOME, XDG_* directories, DOCKER_HOST — what child processes and standard
// locations need. Every PLAITA_* variable goes through the registry instead, so asking for one
// here is a programming error.
func HostEnv(name string) (string, bool) {
	if strings.HasPrefix(name, "PLAITA_") {
		panic("config.HostEnv(" + name + "): PLAITA_ variables are read through the registry")
	}
	return os.LookupEnv(name)
}
