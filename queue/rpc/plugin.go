package rpc

import (
	"encoding/json"
	"strings"

	"github.com/gitlease/gitlease/queue"
)

// Plugin identity, as a queue plugin host sees it.
const (
	PluginName        = "gitlease"
	PluginDescription = "gitlease queue (generation-fenced leases)"
	ProtocolVersion   = "1.2.0"
	crateVersion      = "0.4.0"
)

// PluginInfo names the plugin in InitializeResult.
type PluginInfo struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	PluginKind  string `json:"plugin_kind"`
	Description string `json:"description,omitempty"`
}

// InitializeResult answers initialize (queue v2 §1.3).
type InitializeResult struct {
	ProtocolVersion  string         `json:"protocol_version"`
	PluginInfo       PluginInfo     `json:"plugin_info"`
	Capabilities     capabilities   `json:"capabilities"`
	KindCapabilities map[string]any `json:"kind_capabilities"`
}

type capabilities struct {
	Methods      []string `json:"methods"`
	Streaming    bool     `json:"streaming"`
	Progress     bool     `json:"progress"`
	Cancellation bool     `json:"cancellation"`
}

type initializeParams struct {
	ProtocolVersion *string          `json:"protocol_version"`
	HostInfo        *json.RawMessage `json:"host_info"`
	Capabilities    *json.RawMessage `json:"capabilities"`
	InitExtensions  struct {
		ProjectBinding *struct {
			ProjectRoot json.RawMessage `json:"project_root"`
		} `json:"project_binding"`
	} `json:"init_extensions"`
}

// initialize validates InitializeParams and returns the result and the
// project root the host bound.
func (h *Handler) initialize(params json.RawMessage) (*InitializeResult, *Error) {
	res, _, err := h.bind(params)
	return res, err
}

func (h *Handler) bind(params json.RawMessage) (*InitializeResult, string, *Error) {
	const m = MethodInitialize
	var p initializeParams
	if absent(params) {
		return nil, "", errorf(CodeInvalidParams, "invalid initialize params: missing params")
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, "", errorf(CodeInvalidParams, "invalid initialize params: %v", err)
	}
	for _, f := range []struct {
		name    string
		present bool
	}{{"protocol_version", p.ProtocolVersion != nil}, {"host_info", p.HostInfo != nil}, {"capabilities", p.Capabilities != nil}} {
		if !f.present {
			return nil, "", errorf(CodeInvalidParams, "invalid %s params: missing field `%s`", m, f.name)
		}
	}
	var root string
	if p.InitExtensions.ProjectBinding == nil || json.Unmarshal(p.InitExtensions.ProjectBinding.ProjectRoot, &root) != nil {
		return nil, "", errorf(CodeProjectBindingMismatch, "init_extensions.project_binding is required to bind a project root")
	}
	return &InitializeResult{
		ProtocolVersion: ProtocolVersion,
		PluginInfo:      PluginInfo{Name: PluginName, Version: h.version, PluginKind: "queue", Description: PluginDescription},
		Capabilities:    capabilities{Methods: Methods()},
		KindCapabilities: map[string]any{"queue": map[string]any{
			"crate_version": crateVersion,
			"extra": map[string]any{
				"priority_weighted": false, "max_lease_batch": queue.MaxLeaseBatch, "generation_fenced_leases_v1": true,
			},
		}},
	}, root, nil
}

// EnvRequirement declares an environment variable the plugin host must pass.
type EnvRequirement struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Sensitive   bool   `json:"sensitive"`
	Required    bool   `json:"required"`
}

// Manifest is the plugin manifest `gitlease --manifest` prints.
type Manifest struct {
	Name            string           `json:"name"`
	Version         string           `json:"version"`
	Description     string           `json:"description"`
	PluginKind      string           `json:"plugin_kind"`
	ProtocolVersion string           `json:"protocol_version"`
	Capabilities    []string         `json:"capabilities"`
	EnvRequired     []EnvRequirement `json:"env_required,omitempty"`
}

// NewManifest returns the plugin manifest for this build.
func NewManifest(version string) Manifest {
	return Manifest{
		Name: PluginName, Version: version, Description: PluginDescription, PluginKind: "queue",
		ProtocolVersion: ProtocolVersion, Capabilities: Methods(),
		EnvRequired: []EnvRequirement{
			{Name: "DATABASE_URL", Description: "Postgres connection string", Sensitive: true, Required: true},
			{Name: "GITLEASE_LEASE_TTL", Description: "Queue lease length (Go duration). Default 30m."},
		},
	}
}

func isQueueCall(method string) bool {
	return strings.HasPrefix(method, "queue/") || method == MethodEntryGet
}
