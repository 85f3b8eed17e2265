-- +goose Up
-- The generation allocator: one row per qualified subject, holding the last
-- generation handed out. Allocation is an upsert that row-locks the subject,
-- so concurrent enqueues of one subject serialise here and a generation is
-- only ever taken inside the transaction that creates its item.
CREATE TABLE subject_generations (
    qualified_id    text PRIMARY KEY,
    last_generation bigint NOT NULL CHECK (last_generation >= 1)
);

CREATE SEQUENCE work_items_position_seq;

CREATE TABLE work_items (
    id                  uuid PRIMARY KEY,
    -- Queue order. reorder moves entries to the front with smaller values.
    position            bigint NOT NULL DEFAULT nextval('work_items_position_seq'),
    status              text NOT NULL CHECK (status IN
                          ('pending', 'assigned', 'held', 'completed', 'failed', 'cancelled', 'dropped')),
    -- true for items created by queue/v2/enqueue (or the webhook intake).
    is_v2               boolean NOT NULL,
    -- Canonical id for v2 entries, legacy key otherwise (the wire subject_id).
    subject_id          text NOT NULL,
    -- Canonical qualified id; NULL only for a legacy entry with no usable subject.
    canonical_id        text,
    -- Set once the entry has v2 identity.
    subject_generation  bigint CHECK (subject_generation >= 1),
    task_id             text,
    dispatch            jsonb NOT NULL,
    enqueued_at         timestamptz NOT NULL,
    run_at              text,
    -- run_at parsed; NULL when absent or unparseable (both count as due).
    run_at_time         timestamptz,
    expire_after_secs   bigint CHECK (expire_after_secs >= 0),
    -- run_at_time + expire_after_secs: a pending entry past this is swept.
    expires_after       timestamptz,
    idempotency_key     text UNIQUE,
    request_hash        text,
    repository          text,
    base_ref            text,
    head_ref            text,
    collision_key       text GENERATED ALWAYS AS (lower(btrim(repository)) || E'\n' || head_ref) STORED,
    workflow_id         text,
    workflow_generation bigint CHECK (workflow_generation >= 1),
    lease_owner         text,
    lease_generation    bigint NOT NULL DEFAULT 0 CHECK (lease_generation >= 0),
    lease_expires_at    timestamptz,
    assigned_at         timestamptz,
    held_at             timestamptz,
    finished_at         timestamptz,

    CONSTRAINT work_items_finished_iff_terminal CHECK (
        (status IN ('completed', 'failed', 'cancelled', 'dropped')) = (finished_at IS NOT NULL)),
    CONSTRAINT work_items_assigned_has_time CHECK (status <> 'assigned' OR assigned_at IS NOT NULL),
    CONSTRAINT work_items_held_has_time CHECK (status <> 'held' OR held_at IS NOT NULL),
    CONSTRAINT work_items_v2_has_identity CHECK (
        NOT is_v2 OR (canonical_id IS NOT NULL AND subject_generation IS NOT NULL)),
    CONSTRAINT work_items_generation_needs_identity CHECK (
        subject_generation IS NULL OR canonical_id IS NOT NULL),
    CONSTRAINT work_items_reservation_whole CHECK (
        (repository IS NULL AND base_ref IS NULL AND head_ref IS NULL) OR
        (repository IS NOT NULL AND base_ref IS NOT NULL AND head_ref IS NOT NULL AND base_ref <> head_ref)),
    -- A v2 lease is fenced: an assigned entry with a lease generation has its owner and expiry.
    CONSTRAINT work_items_lease_fenced CHECK (
        lease_generation = 0 OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL
                                 AND workflow_id IS NOT NULL AND workflow_generation IS NOT NULL)),
    CONSTRAINT work_items_idempotency_hashed CHECK (idempotency_key IS NULL OR request_hash IS NOT NULL)
);

-- At most one live generation per qualified subject.
CREATE UNIQUE INDEX work_items_live_subject ON work_items (canonical_id)
    WHERE status IN ('pending', 'assigned', 'held') AND subject_generation IS NOT NULL;

-- A generation names exactly one item, ever.
CREATE UNIQUE INDEX work_items_subject_generation ON work_items (canonical_id, subject_generation)
    WHERE subject_generation IS NOT NULL;

-- At most one live item per reservation collision key.
CREATE UNIQUE INDEX work_items_live_reservation ON work_items (collision_key)
    WHERE status IN ('pending', 'assigned', 'held') AND collision_key IS NOT NULL;

-- The lease scan: due pending entries in queue order.
CREATE INDEX work_items_pending_position ON work_items (position) WHERE status = 'pending';

-- The expiry sweep.
CREATE INDEX work_items_pending_expiry ON work_items (expires_after)
    WHERE status = 'pending' AND expires_after IS NOT NULL;

-- Expired-lease recovery scans.
CREATE INDEX work_items_assigned_expiry ON work_items (lease_expires_at) WHERE status = 'assigned';

-- Legacy subject lookups (legacy keys and canonical ids of live entries).
CREATE INDEX work_items_live_subject_id ON work_items (subject_id)
    WHERE status IN ('pending', 'assigned', 'held');
CREATE INDEX work_items_live_canonical ON work_items (canonical_id)
    WHERE status IN ('pending', 'assigned', 'held');

-- The audit log of status changes made for a reason (release_pending, the
-- expiry sweep), kept apart from work_items so hot rows stay small.
CREATE TABLE work_item_audit (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entry_id    uuid NOT NULL REFERENCES work_items (id),
    at          timestamptz NOT NULL,
    method      text NOT NULL,
    from_status text NOT NULL,
    to_status   text NOT NULL,
    reason      text
);
CREATE INDEX work_item_audit_entry ON work_item_audit (entry_id);

-- The exact-match compare-and-swap of every fenced mutation (queue v2 §2.2):
-- workflow, subject generation and lease must be equal; the repository is
-- compared ignoring case, its refs exactly. expires_at is never compared.
-- +goose StatementBegin
CREATE FUNCTION work_item_fence_matches(
    w work_items, f_workflow_id text, f_workflow_generation bigint, f_qualified_id text,
    f_subject_generation bigint, f_owner_id text, f_lease_generation bigint,
    f_repository text, f_base_ref text, f_head_ref text
) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT w.workflow_id = f_workflow_id
       AND w.workflow_generation = f_workflow_generation
       AND w.canonical_id = f_qualified_id
       AND w.subject_generation = f_subject_generation
       AND w.lease_owner = f_owner_id
       AND w.lease_generation = f_lease_generation
       AND ((w.repository IS NULL AND f_repository IS NULL)
            OR (lower(w.repository) = lower(f_repository) AND w.base_ref = f_base_ref AND w.head_ref = f_head_ref))
$$;
-- +goose StatementEnd

-- +goose Down
-- Migrations are additive; there is no down.
