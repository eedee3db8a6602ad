package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/roles"
)

// probeCommand is `plaita probe [URL]`: a container health check that needs no curl in the
// image. Without a URL it asks this container's own role: /readyz on PLAITA_METRICS_PORT, which
// answers 503 while the role starts or drains.
func probeCommand(tool roles.Tool, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      tool.Name,
		Usage:     tool.Summary,
		UsageText: "plaita probe [URL] [--timeout D]",
		Description: "GETs URL (default http://127.0.0.1:$PLAITA_METRICS_PORT/readyz, the role's readiness: not ready while it\n" +
			"starts or drains) and prints one line. Docker's HEALTHCHECK and compose's healthcheck run it.\n" +
			"Exit status: 0 the answer is 200; 1 any other answer, or none in time; 2 bad usage or configuration.",
		Flags: localFlags(&cli.DurationFlag{Name: "timeout", Value: 3 * time.Second, Usage: "how long to wait for the answer"}),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			const name = "probe"
			cfg, _, err := preflightAs(cmd, tool.Role, name, zerolog.DebugLevel, stderr)
			if err != nil {
				return err
			}
			target, err := probeURL(cmd, cfg)
			if err != nil {
				return err
			}
			if d := cmd.Duration("timeout"); d <= 0 || d > time.Minute {
				return cliUsage(name, "--timeout %s: use a duration above 0 and up to 1m", d)
			}
			status, line, err := probe(ctx, target, cmd.Duration("timeout"))
			if err != nil {
				return cliFail(name, "not ready: %s: %v", target, err)
			}
			if status != http.StatusOK {
				return cliFail(name, "not ready: %s answered %d %s", target, status, line)
			}
			fmt.Fprintf(stdout, "ready: %s\n", target)
			return nil
		},
	}
}

// probeURL is the URL argument, or the role's own /readyz.
func probeURL(cmd *cli.Command, cfg *config.Config) (string, error) {
	const name = "probe"
	switch cmd.Args().Len() {
	case 0:
	case 1:
		u, err := url.Parse(cmd.Args().First())
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", cliUsage(name, "%q is not an http(s) URL", cmd.Args().First())
		}
		return u.String(), nil
	default:
		return "", cliUsage(name, "takes at most one URL")
	}
	port := config.MetricsPort.In(cfg)
	if port <= 0 {
		return "", cliUsage(name, "no URL given and PLAITA_METRICS_PORT is off: name the URL, or set the port the role serves /readyz on")
	}
	host := config.MetricsHost.In(cfg)
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/readyz", nil
}

// probe GETs target: its status and the first line of its body.
func probe(ctx context.Context, target string, timeout time.Duration) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(io.LimitReader(resp.Body, 512)).ReadString('\n')
	return resp.StatusCode, strings.TrimSpace(line), nil
}
