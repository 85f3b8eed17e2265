package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gitlease/gitlease/app/setup"

	"github.com/gitlease/gitlease"
)

// runManifest is `gitlease manifest --url URL`: it prints the GitHub App
// manifest from manifest.yml as indented JSON, with URL filled into its
// URLs. --url defaults to GITLEASE_PUBLIC_URL.
func runManifest(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gitlease manifest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: gitlease manifest --url https://gitlease.example.com\n\n"+
			"Prints the GitHub App manifest (manifest.yml) as JSON, with the URL filled into\n"+
			"url, hook_attributes.url (<URL>/webhook) and redirect_url (<URL>/setup/callback).\n"+
			"Paste it into GitHub's manifest flow, or use the /setup page of `gitlease serve`.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	publicURL := fs.String("url", os.Getenv("GITLEASE_PUBLIC_URL"),
		"the server's public base URL (env GITLEASE_PUBLIC_URL)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return &configError{Setting: "flags", Problem: err.Error()}
	}
	if fs.NArg() > 0 {
		return &configError{Setting: "flags", Problem: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if strings.TrimSpace(*publicURL) == "" {
		return &configError{Setting: "--url", Problem: "required: the public base URL GitHub should call, e.g. --url https://gitlease.example.com"}
	}
	if _, err := setup.ParsePublicURL(*publicURL); err != nil {
		return &configError{Setting: "--url", Problem: err.Error()}
	}
	out, err := setup.RenderManifest(gitlease.ManifestYAML, *publicURL)
	if err != nil {
		return err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, out, "", "  "); err != nil {
		return fmt.Errorf("indent manifest: %w", err)
	}
	pretty.WriteByte('\n')
	if _, err := stdout.Write(pretty.Bytes()); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}
