package githubtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// PressAction is a person pressing a button of a check run, as GitHub has
// it: the check run must offer an action with identifier (GitHub shows
// only the buttons the App set); GitHub then sends the App's webhook a
// check_run requested_action delivery naming the check run, the action's
// identifier, the repository, the installation and login as the sender,
// which it returns. It returns an error, sending nothing, when the check
// run does not exist or offers no such button.
func (s *Server) PressAction(checkRunID int64, identifier, login string) (HookAttempt, error) {
	s.mu.Lock()
	cr := s.checkRuns[checkRunID]
	if cr == nil {
		s.mu.Unlock()
		return HookAttempt{}, fmt.Errorf("githubtest: no check run %d", checkRunID)
	}
	if !slices.ContainsFunc(cr.actions, func(a Action) bool { return a.Identifier == identifier }) {
		s.mu.Unlock()
		return HookAttempt{}, fmt.Errorf("githubtest: check run %d offers no %q button (it offers %v)", checkRunID, identifier, cr.actions)
	}
	var inst int64
	for _, in := range s.installations {
		if in.appID == cr.appID && (in.all || slices.Contains(in.repos, strings.ToLower(cr.repo.fullName()))) {
			inst = in.id
			break
		}
	}
	payload := map[string]any{
		"action":           "requested_action",
		"check_run":        s.checkRunJSON(cr),
		"requested_action": map[string]any{"identifier": identifier},
		"repository":       s.repoJSON(cr.repo),
		"sender":           map[string]any{"login": login, "id": 1000 + len(login), "type": "User"},
		"installation":     map[string]any{"id": inst, "node_id": nodeID("MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u", inst)},
	}
	s.mu.Unlock()
	body, err := json.Marshal(payload)
	if err != nil {
		return HookAttempt{}, fmt.Errorf("githubtest: encode requested_action: %w", err)
	}
	return s.Deliver("check_run", body), nil
}
