-- Every request knows its event in a column of its own, so that a database
-- sharded by event (Citus, core/src/citus.sql) can route it: the event of a
-- hold or book, and the event a confirm, cancel or extend names (its
-- optional `event` field; required on Citus, docs/operations.md "Running on
-- Citus"). 0 where a request names none, or names it wrongly (it is failed
-- at insert anyway). On one server the column only informs, and nothing
-- here changes how a request is claimed or served.

-- The event a request's payload names, as a routing key: 0 unless `event` is
-- a JSON integer of at most 18 digits (so that the cast cannot fail; an
-- event id that large is not a real one, and its request fails validation).
CREATE FUNCTION seatq.event_of(p_payload jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(p_payload -> 'event') = 'number' AND (p_payload ->> 'event') ~ '^[0-9]{1,18}$'
                THEN (p_payload ->> 'event')::bigint ELSE 0 END
$$;

-- Whether this database's tables are distributed (Citus). IMMUTABLE so that
-- a statement asking is planned as if the answer were written in it; the
-- Citus layout (core/src/citus.sql) replaces it, once, with one saying true,
-- which drops every cached plan that used it.
CREATE FUNCTION seatq.distributed() RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT false
$$;

-- 0 until the insert trigger reads the payload's (a row written with the
-- triggers off keeps 0; on one server the column only informs). The Citus
-- layout drops the default: there every insert must give the event.
ALTER TABLE seatq.requests ADD COLUMN event_id bigint;
UPDATE seatq.requests SET event_id = seatq.event_of(payload);
ALTER TABLE seatq.requests ALTER COLUMN event_id SET NOT NULL, ALTER COLUMN event_id SET DEFAULT 0;
-- Producers may give it (seatq.enqueue does; on Citus every insert must),
-- and the insert trigger holds it to the payload's event.
GRANT INSERT (event_id) ON seatq.requests TO seatq_producer;

-- The insert trigger, as 0009_hold_tokens.sql made it, and then the event:
-- taken from the payload where the insert gives none (0, the default); an
-- insert giving another than the payload's is refused (on Citus every
-- insert gives it, since it decides which node keeps the row before any
-- trigger runs).
CREATE OR REPLACE FUNCTION seatq.fail_invalid_request() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    e record;
    v_code text;
    v_message text;
    v_token jsonb := CASE WHEN jsonb_typeof(NEW.payload) = 'object' THEN NEW.payload -> 'token' END;
    v_event bigint := seatq.event_of(NEW.payload);
BEGIN
    -- A new request has no outcome yet. On one server the producers' INSERT
    -- grant leaves the outcome's columns out; on Citus, which writes every
    -- column to the shard, producers are granted the whole table
    -- (core/src/citus.sql) and this holds them to it instead.
    IF (NEW.status <> 'queued' OR NEW.result IS NOT NULL OR NEW.error_code IS NOT NULL
        OR NEW.error_message IS NOT NULL OR NEW.attempts <> 0 OR NEW.started_at IS NOT NULL
        OR NEW.finished_at IS NOT NULL)
       AND pg_has_role(current_user, 'seatq_producer', 'USAGE')
       AND NOT pg_has_role(current_user, 'seatq_admin', 'USAGE')
       AND NOT pg_has_role(current_user, 'seatq_worker', 'USAGE') THEN
        RAISE EXCEPTION 'permission denied: a producer inserts requests, not their outcomes'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.event_id = 0 AND NOT seatq.distributed() THEN
        NEW.event_id := v_event;
    ELSIF NEW.event_id <> v_event THEN
        RAISE EXCEPTION 'event_id % does not match the event its payload names (%)', NEW.event_id, v_event
            USING ERRCODE = 'check_violation',
                  HINT = 'Leave event_id out (it is read from the payload), or use seatq.enqueue.';
    END IF;
    IF NEW.status = 'queued' THEN
        IF NEW.idempotency_key IS NOT NULL THEN
            e := seatq.idempotency_key_error(NEW.idempotency_key);
            IF e.code IS NOT NULL THEN
                RAISE EXCEPTION '%: %', e.code, e.message
                    USING ERRCODE = 'SQ002',
                          HINT = 'An idempotency key is at most 200 characters, without control characters.';
            END IF;
        END IF;
        -- Without a token or a booking's event (most requests), straight to
        -- the fields' check, whose list of fields for unknown_field lacks them.
        IF v_token IS NULL AND (v_event = 0 OR NOT NEW.payload ? 'booking') THEN
            e := seatq.request_error_of_fields(NEW.kind, NEW.payload);
            IF e.code = 'unknown_field' THEN
                e := seatq.request_error(NEW.kind, NEW.payload);
            END IF;
        ELSE
            e := seatq.request_error(NEW.kind, NEW.payload);
        END IF;
        v_code := e.code;
        v_message := e.message;
        IF v_code IS NULL THEN
            v_message := seatq.run_at_error(NEW.run_at);
            v_code := CASE WHEN v_message IS NOT NULL THEN 'run_at_out_of_range' END;
        END IF;
        IF v_code IS NOT NULL THEN
            NEW.status := 'failed';
            NEW.result := NULL;
            NEW.error_code := v_code;
            NEW.error_message := v_message;
            NEW.finished_at := now();
            IF v_code = 'payload_too_large' THEN
                NEW.payload := '{}'::jsonb;
            END IF;
            -- No client can read an infinite time (sqlx, for one, fails on
            -- it); the message keeps what was given.
            IF NOT isfinite(NEW.run_at) THEN
                NEW.run_at := now();
            END IF;
            PERFORM pg_notify('seatq_done', NEW.id::text);
        END IF;
    END IF;
    -- Most requests carry no token: their payload is left as it is, not copied.
    NEW.token_hash := NULL;
    IF v_token IS NOT NULL THEN
        NEW.token_hash := CASE WHEN jsonb_typeof(v_token) = 'string' THEN seatq.token_hash(v_token #>> '{}') END;
        NEW.payload := NEW.payload - 'token';
    END IF;
    RETURN NEW;
END
$$;

-- The payload's error as 0009_hold_tokens.sql checked it, and now a
-- confirm's, cancel's or extend's optional `event`: the booking's event
-- (a positive integer), which routes the request on Citus. (Whether it is
-- the booking's is the worker's to find: a booking of another event is not
-- found.)
CREATE OR REPLACE FUNCTION seatq.request_error(p_kind text, p_payload jsonb, OUT code text, OUT message text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_token jsonb := CASE WHEN jsonb_typeof(p_payload) = 'object' THEN p_payload -> 'token' END;
    v_event jsonb := CASE WHEN jsonb_typeof(p_payload) = 'object' AND p_kind IN ('confirm', 'cancel', 'extend')
                          THEN p_payload -> 'event' END;
BEGIN
    SELECT e.code, e.message INTO code, message
    FROM seatq.request_error_of_fields(
        p_kind, CASE WHEN v_event IS NULL THEN seatq.without_token(p_payload) ELSE seatq.without_token(p_payload) - 'event' END) e;
    IF code = 'unknown_field' THEN
        message := message || CASE WHEN p_kind IN ('confirm', 'cancel', 'extend') THEN ', event, token' ELSE ', token' END;
    END IF;
    IF code IS NOT NULL THEN
        RETURN;
    END IF;
    IF v_event IS NOT NULL THEN
        IF NOT seatq.is_json_int(v_event) THEN
            code := 'wrong_type';
            message := format('event: must be an integer, not %s', seatq.describe_json(v_event));
            RETURN;
        END IF;
        message := seatq.range_error('event', (v_event #>> '{}')::numeric, 1, 9223372036854775807);
        IF message IS NOT NULL THEN
            code := 'invalid_request';
            RETURN;
        END IF;
    END IF;
    IF v_token IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(v_token) <> 'string' THEN
        code := 'wrong_type';
        message := format('token: must be a string, not %s', seatq.describe_json(v_token));
    ELSIF v_token #>> '{}' !~ '^[A-Za-z0-9_-]{43}$' THEN
        code := 'invalid_request';
        message := 'token: must be 43 characters of A-Z, a-z, 0-9, - and _ (a hold token)';
    END IF;
END
$$;

-- seatq.enqueue as 0009_hold_tokens.sql made it, giving the request's event
-- (so that Citus routes the insert), taking any unique conflict as the
-- key's (the key's index is per producer on one server, per producer and
-- event on Citus: docs/operations.md), and on Citus announcing the new
-- request itself, with its event (the insert trigger that announces it on
-- one server would fire on a worker node, out of the listeners' hearing).
CREATE OR REPLACE FUNCTION seatq.enqueue(
    p_kind text,
    p_payload jsonb,
    p_idempotency_key text DEFAULT NULL,
    p_priority int DEFAULT 0,
    p_run_at timestamptz DEFAULT now(),
    p_batch text DEFAULT NULL,
    p_batch_ref text DEFAULT NULL,
    p_batch_line int DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_kind text;
    v_payload jsonb;
    v_token bytea;
    v_code text;
    v_given jsonb;
    v_given_token jsonb;
    v_given_hash bytea;
    v_event bigint := seatq.event_of(p_payload);
BEGIN
    IF p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767'
            USING ERRCODE = 'numeric_value_out_of_range', DETAIL = format('priority %s was given', p_priority);
    END IF;
    INSERT INTO seatq.requests (event_id, kind, payload, idempotency_key, priority, run_at, batch, batch_ref, batch_line)
    VALUES (v_event, p_kind, p_payload, p_idempotency_key, p_priority, coalesce(p_run_at, now()), p_batch, p_batch_ref,
            p_batch_line)
    ON CONFLICT DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
        -- A repeated key (rare): the request given, as it would be stored.
        v_given := seatq.without_token(p_payload);
        v_given_token := CASE WHEN jsonb_typeof(p_payload) = 'object' THEN p_payload -> 'token' END;
        v_given_hash := CASE WHEN jsonb_typeof(v_given_token) = 'string' THEN seatq.token_hash(v_given_token #>> '{}') END;
        SELECT id, kind, payload, token_hash, error_code INTO v_id, v_kind, v_payload, v_token, v_code
        FROM seatq.requests
        WHERE producer = current_user AND idempotency_key = p_idempotency_key
          AND (NOT seatq.distributed() OR event_id = v_event);
        IF v_kind IS DISTINCT FROM p_kind
           OR v_token IS DISTINCT FROM v_given_hash
           OR (v_payload IS DISTINCT FROM v_given
               AND NOT (v_code IS NOT DISTINCT FROM 'payload_too_large'
                        AND (seatq.request_error(p_kind, p_payload)).code = 'payload_too_large')) THEN
            RAISE EXCEPTION 'idempotency_conflict: idempotency key % was first used by request % with another kind or payload',
                seatq.quoted(p_idempotency_key), v_id
                USING ERRCODE = 'SQ001',
                      HINT = 'Use a new key for a new request; the same key with the same kind and payload returns the first request.';
        END IF;
    ELSIF seatq.distributed() THEN
        PERFORM pg_notify('seatq_new', v_event::text);
    END IF;
    RETURN v_id;
END
$$;

-- seatq.check_invariants as 0005_invariants.sql made it, with every join
-- of a booking to its seats on the event too, and on Citus to its request
-- (where every request has its event; on one server a row written with the
-- triggers off may not): the same answer, and on Citus a join of colocated
-- shards, each node checking its own. PL/pgSQL: Citus
-- cannot plan a SQL function's query over distributed tables with a
-- parameter in it (p_drained).
CREATE OR REPLACE FUNCTION seatq.check_invariants(p_drained boolean DEFAULT false)
RETURNS TABLE (violation text, detail text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    WITH live_bookings AS MATERIALIZED (
        SELECT * FROM seatq.bookings
        WHERE seatq.is_live(state, held_until)
    ), granted AS MATERIALIZED (
        SELECT b.id, b.event_id, b.state, b.held_until, g.seat
        FROM live_bookings b CROSS JOIN LATERAL unnest(b.seats) AS g(seat)
    )
    -- no seat granted to two live bookings
    SELECT 'seat_in_two_bookings',
           format('event %s seat %s is in bookings %s', event_id, seat, array_agg(id ORDER BY id))
    FROM granted
    GROUP BY event_id, seat HAVING count(*) > 1
    UNION ALL
    -- every seat a live booking lists is that booking's, in its state
    SELECT 'booking_seats_mismatch',
           format('booking %s lists event %s seat %s, which is %s by booking %s', g.id, g.event_id, g.seat,
                  coalesce(s.state::text, 'missing'), coalesce(s.booking_id::text, 'none'))
    FROM granted g
    LEFT JOIN seatq.seats s ON s.event_id = g.event_id AND s.seat_no = g.seat
    WHERE s.booking_id IS DISTINCT FROM g.id OR s.state::text <> g.state::text
    UNION ALL
    -- a live hold's seats lapse when it does (extend moves both together)
    SELECT 'hold_expiry_mismatch',
           format('booking %s is held until %s but its event %s seat %s until %s', g.id, g.held_until,
                  g.event_id, g.seat, s.held_until)
    FROM granted g
    JOIN seatq.seats s ON s.event_id = g.event_id AND s.seat_no = g.seat
    WHERE s.booking_id = g.id AND s.held_until IS DISTINCT FROM g.held_until
    UNION ALL
    -- every taken seat belongs to a live booking of its event that lists it
    SELECT 'seat_without_booking',
           format('event %s seat %s is %s by booking %s', s.event_id, s.seat_no, s.state, s.booking_id)
    FROM seatq.seats s
    LEFT JOIN seatq.bookings b ON b.event_id = s.event_id AND b.id = s.booking_id
    WHERE seatq.is_live(s.state, s.held_until)
      AND (b.id IS NULL OR NOT seatq.is_live(b.state, b.held_until)
           OR b.state::text <> s.state::text
           OR NOT s.seat_no = ANY (b.seats))
    UNION ALL
    -- one seat per place in the layout
    SELECT 'seat_layout_duplicate',
           format('event %s row %s position %s holds seats %s', event_id, row_no, pos,
                  array_agg(seat_no ORDER BY seat_no))
    FROM seatq.seats
    GROUP BY event_id, row_no, pos HAVING count(*) > 1
    UNION ALL
    -- exactly-once effects: every booking was made by a request that
    -- succeeded and reports it (pruning may have deleted the request since)
    SELECT 'booking_without_outcome',
           format('booking %s was made by request %s, which is %s', b.id, b.request_id, r.status)
    FROM seatq.bookings b
    JOIN seatq.requests r ON r.id = b.request_id AND (r.event_id = b.event_id OR NOT seatq.distributed())
    WHERE r.status <> 'succeeded'
       OR r.kind NOT IN ('hold', 'book')
       OR (r.result ->> 'booking')::bigint IS DISTINCT FROM b.id
    UNION ALL
    -- and every successful hold or book made exactly the booking it reports
    SELECT 'outcome_without_booking',
           format('request %s reports booking %s, which it did not make', r.id, r.result ->> 'booking')
    FROM seatq.requests r
    LEFT JOIN seatq.bookings b
        ON b.id = (r.result ->> 'booking')::bigint AND (b.event_id = r.event_id OR NOT seatq.distributed())
    WHERE r.status = 'succeeded' AND r.kind IN ('hold', 'book')
      AND (b.id IS NULL OR b.request_id <> r.id
           OR cardinality(b.seats) <> jsonb_array_length(r.result -> 'seats'))
    UNION ALL
    SELECT 'request_not_terminal', format('request %s is still queued', r.id)
    FROM seatq.requests r
    WHERE p_drained AND r.status = 'queued';
END
$$;

-- Seconds after a time, for statements Citus ships to a worker node: it
-- refuses a STABLE function or operator (timestamptz + interval is one)
-- applied to a column, and a whole number of seconds after a time is the
-- same in every time zone.
CREATE FUNCTION seatq.secs_after(p_at timestamptz, p_secs float8) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_at + make_interval(secs => p_secs)
$$;

REVOKE ALL ON FUNCTION seatq.event_of(jsonb), seatq.distributed(), seatq.secs_after(timestamptz, float8) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION seatq.event_of(jsonb), seatq.distributed(), seatq.secs_after(timestamptz, float8)
TO seatq_producer, seatq_worker, seatq_admin;

-- seatq.cut_holds as 0008_event_checks.sql made it, in PL/pgSQL: Citus
-- cannot plan a SQL function's statements over distributed tables with
-- parameters in them.
CREATE OR REPLACE FUNCTION seatq.cut_holds(p_event bigint, p_until timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE seatq.seats SET held_until = p_until
    WHERE event_id = p_event AND state = 'held' AND held_until > p_until;
    UPDATE seatq.bookings SET held_until = p_until
    WHERE event_id = p_event AND state = 'held' AND held_until > p_until;
END
$$;

-- The functions below as 0007_availability.sql and 0009_hold_tokens.sql made
-- them, in PL/pgSQL, for the same reason as seatq.cut_holds: Citus plans a
-- PL/pgSQL function's statements with their parameters, and not a SQL
-- function's. Each was already run as a function of its own (security
-- definer, or volatile), never inlined, so nothing changes on one server
-- but that PL/pgSQL keeps its plans for the session.
CREATE OR REPLACE FUNCTION seatq.customer_seats(p_event bigint, p_producer text, p_customer text) RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT coalesce(sum(cardinality(b.seats)), 0)::bigint FROM seatq.bookings b
            WHERE b.event_id = p_event AND b.producer = p_producer AND coalesce(b.customer_key, b.customer) = p_customer
              AND b.limited AND seatq.is_live(b.state, b.held_until));
END
$$;

CREATE OR REPLACE FUNCTION seatq.availability(p_event bigint)
RETURNS TABLE (
    class          smallint,
    seats          bigint,
    free           bigint,
    held           bigint,
    booked         bigint,
    free_min_cents int,
    free_max_cents int,
    min_cents      int,
    max_cents      int
)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN QUERY
    SELECT s.class,
           count(*),
           count(*) FILTER (WHERE s.shown = 'free'),
           count(*) FILTER (WHERE s.shown = 'held'),
           count(*) FILTER (WHERE s.shown = 'booked'),
           min(s.price_cents) FILTER (WHERE s.shown = 'free'),
           max(s.price_cents) FILTER (WHERE s.shown = 'free'),
           min(s.price_cents),
           max(s.price_cents)
    -- OFFSET 0 keeps the subquery from being merged into this one, so that
    -- each seat's shown_as is worked out once, not once per FILTER.
    FROM (SELECT t.class, t.price_cents, seatq.shown_as(t.state, t.held_until) AS shown
          FROM seatq.seats t WHERE t.event_id = p_event OFFSET 0) s
    GROUP BY s.class
    ORDER BY s.class;
END
$$;

CREATE OR REPLACE FUNCTION seatq.seat_map(p_event bigint)
RETURNS TABLE (seat_no int, section text, row_label text, label text, row_no int, pos int, class smallint,
               price_cents int, state seatq.seat_availability)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN QUERY
    SELECT s.seat_no, s.section, s.row_label, s.label, s.row_no, s.pos, s.class, s.price_cents,
           seatq.shown_as(s.state, s.held_until)
    FROM seatq.seats s
    WHERE s.event_id = p_event
    ORDER BY s.seat_no;
END
$$;

CREATE OR REPLACE FUNCTION seatq.seat_states(p_event bigint)
RETURNS TABLE (
    seats        bigint,
    held         int[],
    booked       int[],
    not_for_sale int[]
)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN QUERY
    SELECT count(*),
           coalesce(array_agg(s.seat_no) FILTER (WHERE s.state = 'held' AND seatq.is_live(s.state, s.held_until)), '{}'),
           coalesce(array_agg(s.seat_no) FILTER (WHERE s.state = 'booked'), '{}'),
           coalesce(array_agg(s.seat_no) FILTER (WHERE s.state = 'blocked'), '{}')
    FROM seatq.seats s
    WHERE s.event_id = p_event;
END
$$;
