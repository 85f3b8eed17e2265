// Package gitlease holds the files at the root of the repository that the
// binary embeds. It exists only because go:embed cannot reach outside a
// package's directory, and manifest.yml belongs at the root (docs/deploy.md);
// the code lives in cmd/, app/, webhook/, queue/ and db/.
package gitlease

import _ "embed"

// ManifestYAML is manifest.yml, the GitHub App manifest, with ${URL} standing
// for the server's public base URL. app.RenderManifest turns it into the JSON
// GitHub accepts. Callers must not modify it.
//
//go:embed manifest.yml
var ManifestYAML []byte
