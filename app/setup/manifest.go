package setup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"gopkg.in/yaml.v3"
)

// URLPlaceholder is what manifest.yml writes for the server's public base URL.
const URLPlaceholder = "${URL}"

// ParsePublicURL checks that raw is an absolute http or https URL with a
// host and no user info, query or fragment, and returns it without a
// trailing slash, ready to prefix routes ("/webhook"). It returns an error
// saying what is wrong otherwise.
func ParsePublicURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q is not an http(s) URL", raw)
	case u.Host == "" || u.Opaque != "":
		return "", fmt.Errorf("%q has no host", raw)
	case u.User != nil:
		return "", fmt.Errorf("%q must not carry user info", raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", fmt.Errorf("%q must not have a query or fragment", raw)
	}
	u.Host = strings.ToLower(u.Host)
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

// RenderManifest turns the GitHub App manifest src (YAML, manifest.yml)
// into the JSON GitHub accepts, with every URLPlaceholder in its string
// values replaced by publicURL (normalised by ParsePublicURL). Keys keep
// their order. It returns an error when publicURL is not a valid public
// URL, when src is not one YAML mapping, or when the result lacks name, url
// or hook_attributes.url or still holds a "${" placeholder.
func RenderManifest(src []byte, publicURL string) ([]byte, error) {
	return renderManifest(src, publicURL, "")
}

// renderManifest is RenderManifest with the App name replaced by name when
// name is not empty.
func renderManifest(src []byte, publicURL, name string) ([]byte, error) {
	base, err := ParsePublicURL(publicURL)
	if err != nil {
		return nil, fmt.Errorf("render manifest: public URL: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("render manifest: parse YAML: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("render manifest: the manifest is not one YAML mapping")
	}
	root := doc.Content[0]
	if name != "" {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == "name" {
				root.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name}
			}
		}
	}
	var buf bytes.Buffer
	fill := func(s string) string { return strings.ReplaceAll(s, URLPlaceholder, base) }
	if err := writeJSON(&buf, root, fill, 0); err != nil {
		return nil, fmt.Errorf("render manifest: %w", err)
	}
	out := buf.Bytes()
	if bytes.Contains(out, []byte("${")) {
		return nil, errors.New("render manifest: a ${...} placeholder other than ${URL} is left")
	}
	var check struct {
		Name  string `json:"name"`
		URL   string `json:"url"`
		Hooks struct {
			URL string `json:"url"`
		} `json:"hook_attributes"`
	}
	if err := json.Unmarshal(out, &check); err != nil {
		return nil, fmt.Errorf("render manifest: %w", err)
	}
	if check.Name == "" || check.URL == "" || check.Hooks.URL == "" {
		return nil, errors.New("render manifest: name, url and hook_attributes.url are required")
	}
	return out, nil
}

// writeJSON writes the YAML node n as JSON, keeping mapping order and
// passing every string scalar through fill.
func writeJSON(buf *bytes.Buffer, n *yaml.Node, fill func(string) string, depth int) error {
	if depth > 32 {
		return errors.New("the manifest nests too deeply")
	}
	switch n.Kind {
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias, fill, depth+1)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" {
				return fmt.Errorf("line %d: keys must be plain strings", k.Line)
			}
			if i > 0 {
				buf.WriteByte(',')
			}
			key, _ := json.Marshal(k.Value) // a string always marshals
			buf.Write(key)
			buf.WriteByte(':')
			if err := writeJSON(buf, n.Content[i+1], fill, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, c, fill, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		if s, ok := v.(string); ok {
			v = fill(s)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.Write(b)
	default:
		return fmt.Errorf("line %d: unsupported YAML node", n.Line)
	}
	return nil
}

// parseWebURL checks GitHub's web base URL (GITHUB_URL) and returns it
// without its trailing slash.
func parseWebURL(web string) (string, error) {
	u, err := url.Parse(web)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("GitHub web URL %q is not an http(s) URL", web)
	}
	return strings.TrimRight(web, "/"), nil
}
