#!/bin/sh
# The image's entry point: runs plaita with the arguments given (the role: worker, console, …).
#
# A role's instance id defaults to <role>-<pid>, and in a container the pid is 1 in every
# replica: two workers would both be "worker-1" in the registry and as lease holders. Unless
# PLAITA_INSTANCE_ID is set (to anything, even empty: the preflight then says what is wrong), a
# role gets <role>-<host name> — the container id under Docker, the pod name on Kubernetes.
set -e
if [ -z "${PLAITA_INSTANCE_ID+set}" ]; then
	case "$1" in
	worker | console | filter | schedule | delay)
		PLAITA_INSTANCE_ID="$1-$(hostname)"
		export PLAITA_INSTANCE_ID
		;;
	esac
fi
exec plaita "$@"
