-- Least privilege. Three group roles (NOLOGIN); grant one to each login:
--
--   CREATE ROLE shop LOGIN PASSWORD '…' IN ROLE seatq_producer;
--   CREATE ROLE worker1 LOGIN PASSWORD '…' IN ROLE seatq_worker;
--   CREATE ROLE ops LOGIN PASSWORD '…' IN ROLE seatq_admin;
--
-- seatq_producer: enqueue requests and read the outcomes of its own, and
--   read the bookings its requests made; nothing else (no access to seats,
--   no changing a request once inserted, nothing of another producer's).
-- seatq_worker:   what workers need: claim and finish requests, take and
--   release seats, write bookings, register themselves, prune finished
--   requests past retention (and delete no other).
-- seatq_admin:    every privilege on the schema's tables and functions:
--   retries, pruning, maintenance. (Applying migrations needs the
--   database's owner or a superuser: they create and replace objects.)
--
-- Every grant of the schema is here, so this runs last.
--
-- Roles belong to the whole server, so this tolerates their existing already
-- (another database on the same server created them).

DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['seatq_producer', 'seatq_worker', 'seatq_admin'] LOOP
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END LOOP;
END
$$;

-- ------------------------------------------------------------ isolation
--
-- Producers must not see each other: a shop's requests name its customers
-- and their booking ids. Each request records its producer, set by the
-- database (seatq.requests.producer, DEFAULT current_user, a column a
-- producer may not write), and each booking the producer of the request
-- that made it (seatq.bookings.producer, written by the worker). Row-level
-- security keyed on current_user then shows a producer its own requests
-- and bookings, and nothing else:
--
-- * A login serving one shop enqueues as itself: its requests are its own,
--   as they always were.
-- * A shop with several logins shares through a role of its own, below
--   seatq_producer, that each login runs as (current_user):
--     CREATE ROLE shop_a NOLOGIN IN ROLE seatq_producer;
--     CREATE ROLE shop_a_web LOGIN PASSWORD '…' IN ROLE shop_a;
--     ALTER ROLE shop_a_web SET role = 'shop_a';   -- or SET ROLE shop_a per session
--   Every request is then shop_a's, whichever login sent it. Never
--   seatq_producer itself, which every producer login may SET ROLE to:
--   the insert policy refuses a request as that role.
-- * seatq_worker and seatq_admin see every row, through policies that are
--   simply true. BYPASSRLS would do the same, but it is an attribute of a
--   role, not inherited through membership, so it could not be granted by
--   granting the group role. A true policy costs the worker nothing: the
--   planner drops a constant-true qual, and its statements plan exactly as
--   without row-level security (docs/design.md).
-- * Superusers and the table owner (the role that applied the migrations)
--   bypass row-level security (it is enabled, not forced): the demo, the
--   tests and `seatq` run as a superuser are unaffected.
--
-- Idempotency keys are per producer (the unique index is on producer and
-- key, 0001_queue.sql). Confirm, cancel and extend are checked by the
-- worker, which sees every booking: another producer's booking answers
-- booking_not_found, as one that does not exist (worker/src/sql/bookings.rs).
--
-- A login in two of the roles gets both sets of policies (they are OR'd):
-- a producer login must not also be a worker or an admin.

-- Whether role p_role sees every producer's requests and bookings: a
-- superuser, a role with BYPASSRLS, a member of seatq_admin, or the owner
-- of the tables. A request such a role enqueues may confirm, cancel or
-- extend any booking. False for a role that does not exist (any more).
CREATE FUNCTION seatq.sees_every_producer(p_role text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (
        SELECT 1 FROM pg_catalog.pg_roles r
        WHERE r.rolname = p_role
          AND (r.rolsuper OR r.rolbypassrls
               OR pg_catalog.pg_has_role(r.oid, 'seatq_admin', 'USAGE')
               OR pg_catalog.pg_has_role(r.oid, (SELECT c.relowner FROM pg_catalog.pg_class c
                                                 WHERE c.oid = 'seatq.bookings'::pg_catalog.regclass), 'USAGE')))
$$;

ALTER TABLE seatq.requests ENABLE ROW LEVEL SECURITY;
ALTER TABLE seatq.bookings ENABLE ROW LEVEL SECURITY;

-- Producers: their own rows; a new request is theirs (the column default),
-- and not as seatq_producer (see above).
CREATE POLICY producer_reads_own ON seatq.requests FOR SELECT TO seatq_producer
    USING (producer = current_user);
CREATE POLICY producer_inserts_own ON seatq.requests FOR INSERT TO seatq_producer
    WITH CHECK (producer = current_user AND producer <> 'seatq_producer');
CREATE POLICY producer_reads_own ON seatq.bookings FOR SELECT TO seatq_producer
    USING (producer = current_user);
-- Workers and admins: everything (true, not BYPASSRLS: see above).
CREATE POLICY worker_sees_all ON seatq.requests TO seatq_worker USING (true) WITH CHECK (true);
CREATE POLICY worker_sees_all ON seatq.bookings TO seatq_worker USING (true) WITH CHECK (true);
CREATE POLICY admin_sees_all ON seatq.requests TO seatq_admin USING (true) WITH CHECK (true);
CREATE POLICY admin_sees_all ON seatq.bookings TO seatq_admin USING (true) WITH CHECK (true);

-- Nothing for anyone else (a function is executable by PUBLIC unless
-- revoked).
REVOKE ALL ON SCHEMA seatq FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA seatq FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA seatq FROM PUBLIC;
GRANT USAGE ON SCHEMA seatq TO seatq_producer, seatq_worker, seatq_admin;

-- Every role may read which migrations are applied, so a program connecting
-- with it can tell the schema is current without trying to migrate.
GRANT SELECT ON seatq._sqlx_migrations TO seatq_producer, seatq_worker, seatq_admin;

-- Producers: enqueue (the function, or a plain INSERT of the request's own
-- columns: not `producer`, which the database sets) and read outcomes, the
-- bookings they made and who is working; row-level security (below) shows
-- each producer its own rows only. The trigger functions run with the
-- inserter's rights, so the validation helpers are theirs to execute too.
GRANT INSERT (kind, payload, idempotency_key, priority, run_at, batch, batch_ref, batch_line) ON seatq.requests
    TO seatq_producer;
GRANT SELECT ON seatq.requests, seatq.bookings, seatq.events, seatq.workers TO seatq_producer;
GRANT EXECUTE ON FUNCTION
    seatq.enqueue(text, jsonb, text, int, timestamptz, text, text, int),
    seatq.request_error(text, jsonb),
    seatq.range_error(text, numeric, numeric, numeric),
    seatq.is_json_int(jsonb),
    seatq.describe_json(jsonb),
    seatq.describe_element(jsonb),
    seatq.control_character(text),
    seatq.cut(text),
    seatq.bounded(text),
    seatq.quoted(text),
    seatq.field_name(text),
    seatq.idempotency_key_error(text),
    seatq.run_at_error(timestamptz),
    seatq.fail_invalid_request(),
    seatq.notify_new_requests()
TO seatq_producer, seatq_worker, seatq_admin;
-- Why an event's sales refuse now, as `seatq event list` shows it (a pure
-- function of the event's own columns).
GRANT EXECUTE ON FUNCTION seatq.sale_refusal(timestamptz, timestamptz, timestamptz) TO seatq_producer;

-- Workers. The state predicates are part of their statements (a predicate a
-- role may not execute is not inlined, and then fails). No DELETE on
-- requests: retention goes through seatq.prune_finished, which deletes
-- finished requests past the age given and nothing else.
GRANT SELECT, UPDATE ON seatq.requests TO seatq_worker;
GRANT SELECT ON seatq.events TO seatq_worker;
GRANT SELECT, UPDATE ON seatq.seats TO seatq_worker;
GRANT SELECT, INSERT, UPDATE ON seatq.bookings TO seatq_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON seatq.workers TO seatq_worker;
GRANT EXECUTE ON FUNCTION
    seatq.is_free(seatq.seat_state, timestamptz),
    seatq.is_live(seatq.seat_state, timestamptz),
    seatq.is_live(seatq.booking_state, timestamptz),
    seatq.is_lapsed(seatq.seat_state, timestamptz),
    seatq.is_lapsed(seatq.booking_state, timestamptz),
    seatq.sale_refusal(timestamptz, timestamptz, timestamptz),
    seatq.sales_end(timestamptz, timestamptz),
    seatq.customer_lock(bigint, text, text),
    seatq.customer_seats(bigint, text, text),
    seatq.has_class(bigint, smallint),
    seatq.worker_lock(text, int),
    seatq.lock_cheapest_spread(bigint, smallint, int),
    seatq.check_invariants(boolean),
    seatq.prune_finished(float8, bigint),
    seatq.sees_every_producer(text)
TO seatq_worker;

-- Admins: all of seatq's own tables and functions (the migrations table
-- only to read, as for the others).
GRANT ALL ON SCHEMA seatq TO seatq_admin;
GRANT ALL ON seatq.requests, seatq.events, seatq.seats, seatq.bookings, seatq.workers TO seatq_admin;
GRANT ALL ON ALL FUNCTIONS IN SCHEMA seatq TO seatq_admin;
