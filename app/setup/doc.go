// Package setup serves the GitHub App manifest flow under /setup: it renders
// manifest.yml for this server's public URL, hands it to GitHub to register
// a new App, and shows the credentials GitHub returns once, as a command
// that stores them. It owns no table and keeps its state (the issued
// states, each bound to one browser) in memory for SetupStateTTL; it
// promises that a callback is honoured only with a state it issued, from
// the browser it issued it to, and only for an App whose permissions and
// events are the manifest's. See docs/deploy.md.
package setup
