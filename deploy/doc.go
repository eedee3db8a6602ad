// Package deploy holds the checks of plaita's deployment files, run by `go test ./...` with no
// container engine: the Dockerfile (parsed and linted by BuildKit's own Dockerfile front end,
// then held to the image's rules), .dockerignore (nothing the build needs is left out),
// docker-compose.yml (loaded and validated by compose-go against the Compose specification,
// then held to the stack's rules) and the Kubernetes manifests of deploy/k8s (held to the
// rolling-drain rules; .ci/run also validates them against the Kubernetes schemas with
// kubeconform). docs/operations.md "Containers" and "Kubernetes" explain the rules.
package deploy
