package webhook

// Acts reports whether gitlease may act on a delivery of event with action,
// judged from those two names alone, as GitHub's delivery log shows them.
// It is true for every event and action docs/webhook.md lists: the issue and pull
// request actions that enqueue, their close events that cancel, comment
// commands (issue_comment created), re-runs (check_run and check_suite
// rerequested), the Cancel button (check_run requested_action) and
// installation events (installation deleted, suspend, unsuspend;
// installation_repositories removed); and for "labeled" on
// issues and pull requests when labelTrigger says a trigger label is
// configured. A delivery it is true for may still be ignored once its
// payload is read (a comment that is no command, a label that is not the
// trigger label); one it is false for is always ignored. The redelivery
// reconciler (docs/webhook.md) requests only deliveries it is true for.
func Acts(event, action string, labelTrigger bool) bool {
	switch event {
	case "issues":
		switch action {
		case "opened", "reopened", "closed":
			return true
		case "labeled":
			return labelTrigger
		}
	case "pull_request":
		switch action {
		case "opened", "reopened", "synchronize", "ready_for_review", "closed":
			return true
		case "labeled":
			return labelTrigger
		}
	case "issue_comment":
		return action == "created"
	case "check_run":
		return action == "rerequested" || action == "requested_action"
	case "check_suite":
		return action == "rerequested"
	case "installation":
		return action == "deleted" || action == "suspend" || action == "unsuspend"
	case "installation_repositories":
		return action == "removed"
	}
	return false
}
