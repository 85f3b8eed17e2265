package setup

// setupPages are the templates of the flow's pages.
const setupPages = `
{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>{{.Title}} · gitlease</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;color:#1f2328}
pre,textarea{font:13px/1.4 ui-monospace,monospace;background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:.75rem;overflow:auto}
textarea{width:100%;box-sizing:border-box}
.warn{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:.5rem .75rem}
button{font-size:1rem;padding:.5rem 1rem;border-radius:6px;border:1px solid #1f883d;background:#1f883d;color:#fff;cursor:pointer}
dt{font-weight:600}dd{margin:0 0 .5rem}
</style></head><body>
<h1>{{.Title}}</h1>
{{end}}

{{define "foot"}}</body></html>
{{end}}

{{define "error"}}{{template "head" .}}
<p>{{.Message}}</p>
<p><a href="/setup">Back to /setup</a></p>
{{template "foot" .}}{{end}}

{{define "start"}}{{template "head" .}}
<p>This registers a new GitHub App for gitlease from its manifest: GitHub shows you the App it
will create, you confirm, and GitHub sends you back here, where the App's ID, webhook secret and
private key are shown <strong>once</strong>.</p>
<p>GitHub will deliver webhooks to <code>{{.PublicURL}}/webhook</code>.
{{if .Derived}}This URL was taken from your request; if GitHub must reach this server under another
address, set <code>GITLEASE_PUBLIC_URL</code> and reload.{{end}}</p>
{{if .PlainHTTP}}<p class="warn">This URL is plain HTTP: GitHub would send webhooks unencrypted. Serve gitlease
behind HTTPS for anything but a local experiment.</p>{{end}}
<form id="register" action="{{.Action}}" method="post">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<button type="submit">Create the GitHub App on GitHub</button>
</form>
<h2>Options</h2>
<form action="/setup" method="get">
<p><label>Organization (empty: your personal account) <input name="org" value="{{.Org}}"></label></p>
<p><label>App name (App names are unique on GitHub) <input name="name" value="{{.Name}}" maxlength="34"></label></p>
<p><button type="submit">Update</button></p>
</form>
<h2>The manifest</h2>
<pre id="manifest">{{.ManifestPretty}}</pre>
{{template "foot" .}}{{end}}

{{define "done"}}{{template "head" .}}
<p class="warn"><strong>This page is shown once.</strong> GitHub will not show the private key again, and
reloading this page will not show it either. Store the values below before you leave.</p>
<dl>
<dt>App ID</dt><dd id="app-id">{{.App.ID}}</dd>
<dt>Slug</dt><dd id="app-slug">{{.App.Slug}}</dd>
{{if .App.Owner}}<dt>Owner</dt><dd>{{.App.Owner}}</dd>{{end}}
{{if .App.HTMLURL}}<dt>App page</dt><dd><a href="{{.App.HTMLURL}}">{{.App.HTMLURL}}</a></dd>{{end}}
<dt>Webhook secret</dt><dd><code id="webhook-secret">{{if .HasWebhookKey}}{{.App.WebhookSecret}}{{else}}(none: set one in the App's settings){{end}}</code></dd>
</dl>
<h2>Private key</h2>
<textarea id="private-key" rows="12" readonly>{{.App.PEM}}</textarea>
<h2>Next steps</h2>
<ol>
<li>Save the private key above to a file, <code>gitlease-private-key.pem</code>, readable only by you.</li>
<li>Give gitlease the credentials as secrets. On Fly:
<pre>{{.SecretsCmd}}</pre>
Elsewhere, set the environment variables <code>GITHUB_APP_ID</code>, <code>GITHUB_PRIVATE_KEY</code> (or
<code>GITHUB_PRIVATE_KEY_FILE</code>), <code>GITHUB_WEBHOOK_SECRET</code> and <code>GITHUB_APP_SLUG</code>
the same way, then restart gitlease (<code>fly secrets set</code> restarts the machines for you).
Delete the key file once it is stored.</li>
<li>{{if .InstallURL}}<a href="{{.InstallURL}}">Install the App</a>{{else}}Install the App from its settings page on GitHub{{end}}
on the repositories gitlease should serve.</li>
<li>Check that gitlease is ready{{if .ReadyzURL}} at <a href="{{.ReadyzURL}}">{{.ReadyzURL}}</a>{{end}}, then open an
issue in one of those repositories: a <code>gitlease</code> check run and a draft pull request follow.</li>
</ol>
{{template "foot" .}}{{end}}
`
