-- The on-sale: a fair line, and a waiting list that hands seats over by
-- itself (docs/design.md "The line and the waiting list").
--
-- A hold or book may ask to wait (`wait_seconds`, 1 to 604800). Such a
-- request is in its event's *line*:
--
-- * Fair line. The line requests of one event are claimed one batch at a
--   time, in arrival order: a claim takes the event's line lock
--   (seatq.line_lock, a transaction-level advisory lock, tried, never waited
--   for) before it takes any of the event's line requests, and a claim that
--   cannot have it skips them. One that arrives before the event's sales open
--   is due when they open, and the line starts in arrival order then.
-- * Waiting list. A line request that would be refused `sold_out` (or
--   `no_adjacent_seats`, side by side) joins the event's waiting list
--   instead (seatq.waiting; the request is `waiting`) until seats come free
--   for it or its wait ends (then `sold_out`). While a class of an event has
--   a waiting list, its free seats are the list's: no other request is given
--   them (the worker's allocation reads seatq.waiting in the statements that
--   find free seats).
-- * Hand-over. Whoever frees seats of an event with a waiting list (a
--   cancel, the sweeper freeing lapsed holds) serves the list in the same
--   transaction (seatq.serve_line), under the event's line lock: the parties
--   that now fit are given their seats, holds with a fresh window (bookings
--   for a `book`), in the event's order (seatq.waitlist_order).

-- A request waiting is neither queued nor finished.
ALTER TABLE seatq.requests DROP CONSTRAINT outcome_matches_status;
ALTER TABLE seatq.requests ADD CONSTRAINT outcome_matches_status CHECK (
    (status = 'queued')
 OR (status = 'waiting' AND result IS NULL AND error_code IS NULL)
 OR (status = 'succeeded' AND result IS NOT NULL AND error_code IS NULL)
 OR (status IN ('failed', 'dead') AND error_code IS NOT NULL AND result IS NULL));

-- Whether the request is in its event's line (it asked to wait): set by the
-- insert trigger from the payload, whatever an insert gives.
ALTER TABLE seatq.requests ADD COLUMN line boolean NOT NULL DEFAULT false;
-- A queued line request's place: the event's queued line requests before it.
CREATE INDEX requests_line ON seatq.requests (event_id, id) WHERE line AND status = 'queued';

-- The order a waiting list is served in, per event:
-- * strict: in arrival order; a party that cannot be completed yet keeps
--   every seat that comes free for itself, and the parties behind it wait;
-- * first_fit: the earliest party the free seats complete, whatever its
--   place; a big party may wait while smaller ones behind it are served;
-- * bounded (the default): the first that fits, until seats for as many as
--   a party wants have gone to parties behind it; from then on that party is
--   served first, as in strict order.
CREATE TYPE seatq.waitlist_order AS ENUM ('strict', 'first_fit', 'bounded');
ALTER TABLE seatq.events
    ADD COLUMN waitlist_order seatq.waitlist_order NOT NULL DEFAULT 'bounded',
    -- From then on the waiting list takes no one, and its parties are told
    -- `sold_out` (seatq event close-list).
    ADD COLUMN waitlist_closed_at timestamptz CONSTRAINT events_waitlist_closed_at_finite CHECK (isfinite(waitlist_closed_at));

-- The waiting list: one row per waiting party, in arrival order (its
-- request's id). `passed` counts the seats given to parties behind it while
-- it waited (the bounded order's rule).
CREATE TABLE seatq.waiting (
    event_id     bigint NOT NULL,
    request_id   bigint NOT NULL,
    class        smallint NOT NULL,
    party        int NOT NULL CHECK (party > 0),
    together     boolean NOT NULL,
    -- When its wait ends: then it is failed `sold_out`.
    until        timestamptz NOT NULL,
    -- Who the per-customer limit counts (as seatq.bookings.customer_key).
    customer_key text,
    passed       int NOT NULL DEFAULT 0,
    joined_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, request_id)
);
-- Serving a class's list in order; and whether a class has a list at all,
-- which every statement giving out free seats asks.
CREATE INDEX waiting_in_order ON seatq.waiting (event_id, class, request_id);
-- An event's waits that have ended.
CREATE INDEX waiting_by_deadline ON seatq.waiting (event_id, until);

-- The advisory-lock key of event p_event's line: whoever claims its line
-- requests, joins its waiting list or serves it holds it until commit.
CREATE FUNCTION seatq.line_lock(p_event bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtextextended('seatq line/' || p_event, 0)
$$;

-- The payload's error as 0010_event_routing.sql checked it, and now a hold's
-- or book's optional wait_seconds, checked after the rest (as Rust's
-- validate::check does): an integer from 1 to 604800 (a week), on a party
-- that takes the cheapest seats or sits together (it names no seats and
-- takes no part of a party).
ALTER FUNCTION seatq.request_error(text, jsonb) RENAME TO request_error_before_wait;

CREATE FUNCTION seatq.request_error(p_kind text, p_payload jsonb, OUT code text, OUT message text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_wait jsonb := CASE WHEN jsonb_typeof(p_payload) = 'object' AND p_kind IN ('hold', 'book')
                         THEN p_payload -> 'wait_seconds' END;
BEGIN
    SELECT e.code, e.message INTO code, message
    FROM seatq.request_error_before_wait(p_kind, CASE WHEN v_wait IS NULL THEN p_payload ELSE p_payload - 'wait_seconds' END) e;
    IF code = 'unknown_field' AND p_kind IN ('hold', 'book') THEN
        message := message || ', wait_seconds';
    END IF;
    IF code IS NOT NULL OR v_wait IS NULL THEN
        RETURN;
    END IF;
    IF NOT seatq.is_json_int(v_wait) THEN
        code := 'wrong_type';
        message := format('wait_seconds: must be an integer, not %s', seatq.describe_json(v_wait));
        RETURN;
    END IF;
    message := seatq.range_error('wait_seconds', (v_wait #>> '{}')::numeric, 1, 604800);
    IF message IS NULL AND p_payload ? 'seats' AND jsonb_array_length(p_payload -> 'seats') > 0 THEN
        message := 'wait_seconds: a party that names its seats cannot wait for them';
    ELSIF message IS NULL AND p_payload -> 'partial' = 'true'::jsonb THEN
        message := 'wait_seconds: a partial party cannot wait';
    END IF;
    IF message IS NOT NULL THEN
        code := 'invalid_request';
    END IF;
END
$$;

-- After the insert trigger: whether the request is in its event's line, and
-- a line request that arrives before its event's sales open is due when
-- they open (the line then starts in arrival order). It fires only for a
-- payload asking to wait, so other requests pay nothing for it (their
-- `line` is the default, false: producers may not insert the column on one
-- server, and a `line` forged on Citus, without `wait_seconds`, only puts
-- a request in the line, never on the waiting list).
CREATE FUNCTION seatq.join_the_line() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_from timestamptz;
BEGIN
    NEW.line := NEW.status = 'queued' AND NEW.kind IN ('hold', 'book') AND NEW.payload ? 'wait_seconds';
    IF NEW.line THEN
        SELECT e.sales_from INTO v_from FROM seatq.events e WHERE e.id = NEW.event_id;
        IF v_from > NEW.run_at THEN
            NEW.run_at := v_from;
        END IF;
    END IF;
    RETURN NEW;
END
$$;
-- (Triggers fire in name order: after requests_validate.)
CREATE TRIGGER requests_wait BEFORE INSERT ON seatq.requests
    FOR EACH ROW WHEN (NEW.payload ? 'wait_seconds') EXECUTE FUNCTION seatq.join_the_line();

-- Fail the waiting parties of event p_event whose wait is over, or all of
-- them once its list is closed or its sales are over; returns how many.
-- The caller holds the event's line lock.
CREATE FUNCTION seatq.end_waits(p_event bigint) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_closed timestamptz;
    v_refusal text;
    v_ended bigint[];
    v_code text;
    v_message text;
    v_cut timestamptz;
    -- The time as a value: Citus refuses now() inside a CASE of an UPDATE.
    v_now timestamptz := now();
BEGIN
    SELECT e.waitlist_closed_at, seatq.sale_refusal(e.sales_from, e.sales_until, e.closed_at)
    INTO v_closed, v_refusal
    FROM seatq.events e WHERE e.id = p_event;
    -- Every wait ends when the list is closed or the sales are; otherwise
    -- those that have run out (by the index on the event's deadlines).
    v_cut := CASE WHEN v_closed <= v_now OR v_refusal = 'sales_closed' THEN 'infinity' ELSE v_now END;
    -- The code and message as values (Citus takes no function but an
    -- immutable one inside an UPDATE's CASE).
    v_code := CASE WHEN v_refusal = 'sales_closed' THEN 'sales_closed' ELSE 'sold_out' END;
    v_message := CASE
        WHEN v_refusal = 'sales_closed' THEN format('sales for event %s have closed', p_event)
        WHEN v_closed <= v_now THEN format('sold out: the waiting list of event %s is closed', p_event)
        ELSE 'sold out: no seats came free for this party before its wait ended' END;
    WITH gone AS (
        DELETE FROM seatq.waiting w
        WHERE w.event_id = p_event
          AND w.until <= v_cut
        RETURNING w.request_id
    ), failed AS (
        UPDATE seatq.requests r
        SET status = 'failed', error_code = v_code, error_message = v_message, finished_at = v_now
        FROM gone
        WHERE r.id = gone.request_id AND r.event_id = p_event AND r.status = 'waiting'
        RETURNING r.id
    )
    SELECT array_agg(id) INTO v_ended FROM failed;
    -- Announced by a statement of its own, which runs where this function
    -- does (on Citus, the coordinator, where the listeners are).
    PERFORM pg_notify('seatq_done', u.id::text) FROM unnest(v_ended) AS u(id);
    RETURN coalesce(cardinality(v_ended), 0);
END
$$;

-- The seats a waiting party would be given now, locked (SKIP LOCKED: a seat
-- another transaction holds is not free to give): the cheapest free seats
-- of its class, lowest numbers first; or, side by side, the cheapest block
-- of adjacent free seats in one row (least total price, then the lowest row
-- and position). Fewer than the party (or none) when it does not fit.
CREATE FUNCTION seatq.seats_for(p_event bigint, p_class smallint, p_party int, p_together boolean) RETURNS int[]
LANGUAGE plpgsql AS $$
DECLARE
    v_row int;
    v_pos int;
BEGIN
    IF NOT p_together THEN
        RETURN ARRAY(
            SELECT s.seat_no FROM seatq.seats s
            WHERE s.event_id = p_event AND s.class = p_class AND seatq.is_free(s.state, s.held_until)
            ORDER BY s.price_cents, s.seat_no
            LIMIT p_party
            FOR UPDATE SKIP LOCKED);
    END IF;
    -- Runs of adjacent free seats (a row's positions, consecutive), then
    -- each block of p_party within one, from its first seat.
    SELECT b.row_no, b.pos INTO v_row, v_pos
    FROM (
        SELECT f.row_no, f.pos,
               count(*) OVER w AS n,
               sum(f.price_cents) OVER w AS total
        FROM (
            SELECT s.row_no, s.pos, s.price_cents, s.pos - row_number() OVER (PARTITION BY s.row_no ORDER BY s.pos) AS run
            FROM seatq.seats s
            WHERE s.event_id = p_event AND s.class = p_class AND seatq.is_free(s.state, s.held_until)
        ) f
        WINDOW w AS (PARTITION BY f.row_no, f.run ORDER BY f.pos ROWS BETWEEN CURRENT ROW AND p_party - 1 FOLLOWING)
    ) b
    WHERE b.n = p_party
    ORDER BY b.total, b.row_no, b.pos
    LIMIT 1;
    IF v_row IS NULL THEN
        RETURN '{}';
    END IF;
    RETURN ARRAY(
        SELECT s.seat_no FROM seatq.seats s
        WHERE s.event_id = p_event AND s.class = p_class AND s.row_no = v_row
          AND s.pos BETWEEN v_pos AND v_pos + p_party - 1 AND seatq.is_free(s.state, s.held_until)
        ORDER BY s.pos
        FOR UPDATE SKIP LOCKED);
END
$$;

-- Serve event p_event's waiting list: end the waits that are over, then
-- give each class's free seats to its waiting parties in the event's order
-- (seatq.waitlist_order), each party all its seats or none. Returns how
-- many parties it served or ended, or -1 when another transaction holds
-- the line and `p_wait` is false (the sweeper's pass, which comes again);
-- with `p_wait`, it waits for it (a cancel: the line's holder commits within
-- a batch). Each party served is told as any request is (seatq_done) when
-- this transaction commits.
CREATE FUNCTION seatq.serve_line(p_event bigint, p_wait boolean) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    ev record;
    w record;
    rq record;
    v_class smallint;
    v_done int;
    v_after bigint;
    v_free int;
    v_run int;
    v_seats int[];
    v_state seatq.booking_state;
    v_seat_state seatq.seat_state;
    v_result jsonb;
    v_until timestamptz;
    v_total bigint;
    v_list jsonb;
    v_booking bigint;
    v_key text;
    v_used bigint;
    v_message text;
    -- As in seatq.end_waits.
    v_now timestamptz := now();
BEGIN
    IF p_wait THEN
        PERFORM pg_advisory_xact_lock(seatq.line_lock(p_event));
    ELSIF NOT pg_try_advisory_xact_lock(seatq.line_lock(p_event)) THEN
        RETURN -1;
    END IF;
    -- (Asked under the lock: a party joining commits before this reads.)
    IF NOT EXISTS (SELECT 1 FROM seatq.waiting x WHERE x.event_id = p_event) THEN
        RETURN 0;
    END IF;
    v_done := seatq.end_waits(p_event);
    SELECT e.waitlist_order, e.per_customer, seatq.sale_refusal(e.sales_from, e.sales_until, e.closed_at) AS refusal,
           seatq.sales_end(e.sales_until, e.closed_at) AS ends
    INTO ev FROM seatq.events e WHERE e.id = p_event;
    IF NOT FOUND OR ev.refusal IS NOT NULL THEN
        RETURN v_done;
    END IF;
    -- Class by class, each found by one index probe (a DISTINCT would read
    -- the whole list).
    v_class := -32768;
    LOOP
        SELECT min(x.class) INTO v_class FROM seatq.waiting x WHERE x.event_id = p_event AND x.class > v_class;
        EXIT WHEN v_class IS NULL;
        v_after := 0;
        LOOP
            SELECT count(*) INTO v_free FROM seatq.seats s
            WHERE s.event_id = p_event AND s.class = v_class AND seatq.is_free(s.state, s.held_until);
            EXIT WHEN v_free = 0;
            -- The longest run of adjacent free seats, where side-by-side
            -- parties wait.
            v_run := 0;
            IF EXISTS (SELECT 1 FROM seatq.waiting x WHERE x.event_id = p_event AND x.class = v_class AND x.together) THEN
                SELECT coalesce(max(n), 0) INTO v_run FROM (
                    SELECT count(*) AS n FROM (
                        SELECT s.row_no, s.pos - row_number() OVER (PARTITION BY s.row_no ORDER BY s.pos) AS run
                        FROM seatq.seats s
                        WHERE s.event_id = p_event AND s.class = v_class AND seatq.is_free(s.state, s.held_until)
                    ) f GROUP BY f.row_no, f.run
                ) r;
            END IF;
            -- The next party to try: one the free seats could complete, or
            -- one that the order says is served before those behind it.
            SELECT x.* INTO w FROM seatq.waiting x
            WHERE x.event_id = p_event AND x.class = v_class AND x.request_id > v_after
              AND (CASE WHEN x.together THEN x.party <= v_run ELSE x.party <= v_free END
                   OR ev.waitlist_order = 'strict'
                   OR (ev.waitlist_order = 'bounded' AND x.passed >= x.party))
            ORDER BY x.request_id
            LIMIT 1;
            EXIT WHEN NOT FOUND;
            v_seats := seatq.seats_for(p_event, v_class, w.party, w.together);
            IF cardinality(v_seats) < w.party THEN
                -- It does not fit (yet): it keeps its place, and the parties
                -- behind it wait too if the order says so.
                EXIT WHEN ev.waitlist_order = 'strict' OR (ev.waitlist_order = 'bounded' AND w.passed >= w.party);
                v_after := w.request_id;
                CONTINUE;
            END IF;
            SELECT r.id, r.kind, r.producer, r.payload, r.token_hash INTO rq FROM seatq.requests r
            WHERE r.id = w.request_id AND r.event_id = p_event AND r.status = 'waiting'
            FOR UPDATE SKIP LOCKED;
            IF NOT FOUND THEN
                -- Not waiting any more (or being changed): not served here.
                v_after := w.request_id;
                CONTINUE;
            END IF;
            v_key := coalesce(w.customer_key, rq.payload ->> 'customer');
            IF ev.per_customer IS NOT NULL THEN
                IF NOT pg_try_advisory_xact_lock(seatq.customer_lock(p_event, rq.producer, v_key)) THEN
                    -- A batch is booking for this customer now: next time.
                    v_after := w.request_id;
                    CONTINUE;
                END IF;
                v_used := seatq.customer_seats(p_event, rq.producer, v_key);
                IF v_used + w.party > ev.per_customer THEN
                    DELETE FROM seatq.waiting x WHERE x.event_id = p_event AND x.request_id = w.request_id;
                    v_message := format('event %s allows %s seats per customer; %s has %s, and %s more would be %s',
                                        p_event, ev.per_customer, v_key, v_used, w.party, v_used + w.party);
                    UPDATE seatq.requests r
                    SET status = 'failed', error_code = 'customer_limit_exceeded', finished_at = v_now,
                        error_message = v_message
                    WHERE r.id = w.request_id AND r.event_id = p_event;
                    PERFORM pg_notify('seatq_done', w.request_id::text);
                    v_done := v_done + 1;
                    CONTINUE;
                END IF;
            END IF;
            -- In seat-number order, as a booking lists them (sorted here:
            -- Citus takes no subquery in an INSERT).
            v_seats := ARRAY(SELECT unnest(v_seats) ORDER BY 1);
            v_state := CASE WHEN rq.kind = 'book' THEN 'booked' ELSE 'held' END;
            v_until := CASE WHEN v_state = 'held'
                            THEN least(v_now + coalesce((rq.payload ->> 'hold_seconds')::int, 600) * interval '1 second', ev.ends) END;
            SELECT sum(s.price_cents),
                   jsonb_agg(jsonb_build_object('seat', s.seat_no, 'class', s.class, 'row', s.row_no, 'pos', s.pos,
                                                'price_cents', s.price_cents, 'section', s.section,
                                                'row_label', s.row_label, 'label', s.label) ORDER BY s.seat_no)
            INTO v_total, v_list
            FROM seatq.seats s WHERE s.event_id = p_event AND s.seat_no = ANY (v_seats);
            INSERT INTO seatq.bookings (event_id, customer, state, seats, total_cents, held_until, request_id, producer,
                                        limited, token_hash, customer_key)
            VALUES (p_event, rq.payload ->> 'customer', v_state, v_seats, v_total, v_until,
                    rq.id, rq.producer, ev.per_customer IS NOT NULL, rq.token_hash, w.customer_key)
            RETURNING id INTO v_booking;
            -- Values made here, not in the statements: Citus takes no
            -- function but an immutable one inside an UPDATE's CASE.
            v_seat_state := v_state::text::seatq.seat_state;
            v_result := jsonb_build_object('booking', v_booking, 'event', p_event, 'customer', rq.payload ->> 'customer',
                                           'state', v_state, 'seats', v_list, 'total_cents', v_total)
                        || CASE WHEN v_until IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('held_until', v_until) END;
            UPDATE seatq.seats s SET state = v_seat_state, booking_id = v_booking, held_until = v_until
            WHERE s.event_id = p_event AND s.seat_no = ANY (v_seats);
            UPDATE seatq.requests r
            SET status = 'succeeded', finished_at = v_now, started_at = coalesce(r.started_at, v_now), result = v_result
            WHERE r.id = rq.id AND r.event_id = p_event;
            DELETE FROM seatq.waiting x WHERE x.event_id = p_event AND x.request_id = w.request_id;
            -- Every party still waiting ahead of it was passed over.
            UPDATE seatq.waiting x SET passed = x.passed + w.party
            WHERE x.event_id = p_event AND x.class = v_class AND x.request_id < w.request_id;
            PERFORM pg_notify('seatq_done', rq.id::text);
            v_done := v_done + 1;
            -- From the head again: a party passed over may now come first.
            v_after := 0;
        END LOOP;
    END LOOP;
    RETURN v_done;
END
$$;

-- Put these requests of event p_event (claimed by the caller's batch, each
-- refused for want of seats, each asking to wait) on its waiting list, with
-- their customers in normal form (NULL where that is the name as given),
-- and serve the list at once: seats freed by a transaction that committed
-- after the batch read them go to the list's parties now. Returns each
-- request's status after: waiting, succeeded (served at once) or failed (its
-- wait was already over), 'contended' for all when another transaction
-- holds the line (the batch tries them again), 'closed' when the event's
-- list is closed (the batch refuses them). Waiting requests are announced
-- (seatq_done) too, so that a client waiting on one learns its place.
CREATE FUNCTION seatq.join_line(p_event bigint, p_requests bigint[], p_keys text[])
RETURNS TABLE (request_id bigint, status text)
LANGUAGE plpgsql AS $$
DECLARE
    j record;
    -- As in seatq.end_waits.
    v_now timestamptz := now();
BEGIN
    IF NOT pg_try_advisory_xact_lock(seatq.line_lock(p_event)) THEN
        RETURN QUERY SELECT u.id, 'contended'::text FROM unnest(p_requests) AS u(id);
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM seatq.events e WHERE e.id = p_event AND e.waitlist_closed_at <= v_now) THEN
        RETURN QUERY SELECT u.id, 'closed'::text FROM unnest(p_requests) AS u(id);
        RETURN;
    END IF;
    -- A row at a time: Citus would run an INSERT ... SELECT of these through
    -- the coordinator, committed in two phases.
    FOR j IN
        SELECT q.id, q.payload, q.created_at, k.key
        FROM unnest(p_requests, p_keys) AS k(id, key)
        JOIN seatq.requests q ON q.id = k.id AND q.event_id = p_event
    LOOP
        INSERT INTO seatq.waiting (event_id, request_id, class, party, together, until, customer_key, joined_at)
        VALUES (p_event, j.id, (j.payload ->> 'class')::smallint, (j.payload ->> 'party')::int,
                coalesce((j.payload ->> 'together')::boolean, false),
                seatq.secs_after(j.created_at, (j.payload ->> 'wait_seconds')::float8), j.key, v_now);
    END LOOP;
    UPDATE seatq.requests r SET status = 'waiting', started_at = coalesce(r.started_at, v_now)
    WHERE r.id = ANY (p_requests) AND r.event_id = p_event;
    PERFORM seatq.serve_line(p_event, true);
    PERFORM pg_notify('seatq_done', u.id::text) FROM unnest(p_requests) AS u(id);
    RETURN QUERY
    SELECT r.id, r.status::text FROM unnest(p_requests) WITH ORDINALITY AS u(id, ord)
    JOIN seatq.requests r ON r.id = u.id AND r.event_id = p_event
    ORDER BY u.ord;
END
$$;

-- A request's place (a producer reads it with the request): in the line,
-- the event's queued line requests before it; on the waiting list, the
-- parties of its class ahead of it and the seats they want. NULL for a
-- request in neither. SECURITY DEFINER: a producer learns how many wait
-- ahead, never whose.
CREATE FUNCTION seatq.place(p_event bigint, p_request bigint, p_status seatq.request_status, p_line boolean)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_class smallint;
    v_parties bigint;
    v_seats bigint;
BEGIN
    IF p_status = 'queued' AND p_line THEN
        SELECT count(*) INTO v_parties FROM seatq.requests r
        WHERE r.event_id = p_event AND r.line AND r.status = 'queued' AND r.id < p_request;
        RETURN jsonb_build_object('list', 'line', 'parties_ahead', v_parties);
    ELSIF p_status = 'waiting' THEN
        SELECT w.class INTO v_class FROM seatq.waiting w WHERE w.event_id = p_event AND w.request_id = p_request;
        SELECT count(*), coalesce(sum(w.party), 0) INTO v_parties, v_seats FROM seatq.waiting w
        WHERE w.event_id = p_event AND w.class = v_class AND w.request_id < p_request;
        RETURN jsonb_build_object('list', 'waiting', 'parties_ahead', v_parties, 'seats_ahead', v_seats);
    END IF;
    RETURN NULL;
END
$$;

-- An event's line and waiting list, for operators (seatq event show, the
-- dashboard): queued line requests, waiting parties, the seats they want,
-- and when the longest-waiting joined.
CREATE FUNCTION seatq.line_summary(p_event bigint,
    OUT in_line bigint, OUT waiting bigint, OUT seats_wanted bigint, OUT oldest timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    SELECT count(*) INTO in_line FROM seatq.requests r WHERE r.event_id = p_event AND r.line AND r.status = 'queued';
    SELECT count(*), coalesce(sum(w.party), 0), min(w.joined_at) INTO waiting, seats_wanted, oldest
    FROM seatq.waiting w WHERE w.event_id = p_event;
END
$$;

-- The invariants as 0010_event_routing.sql checks them, and the waiting
-- list's: a waiting party is a request `waiting`, and the other way round;
-- and, once the queue is drained, no class's free seats would complete the
-- head of its waiting list (they are the list's, and serving it gives them
-- out), nor, in first-fit order, any party of it.
ALTER FUNCTION seatq.check_invariants(boolean) RENAME TO check_invariants_before_wait;

CREATE FUNCTION seatq.check_invariants(p_drained boolean DEFAULT false)
RETURNS TABLE (violation text, detail text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY SELECT * FROM seatq.check_invariants_before_wait(p_drained);
    RETURN QUERY
    SELECT 'waiting_without_request', format('event %s party of request %s is waiting, but its request is %s',
                                             w.event_id, w.request_id, coalesce(r.status::text, 'missing'))
    FROM seatq.waiting w
    LEFT JOIN seatq.requests r ON r.id = w.request_id AND r.event_id = w.event_id
    WHERE r.status IS DISTINCT FROM 'waiting';
    RETURN QUERY
    SELECT 'request_not_on_list', format('request %s is waiting but not on its event''s waiting list', r.id)
    FROM seatq.requests r
    LEFT JOIN seatq.waiting w ON w.event_id = r.event_id AND w.request_id = r.id
    WHERE r.status = 'waiting' AND w.request_id IS NULL;
    RETURN QUERY
    WITH free AS (
        SELECT s.event_id, s.class, count(*) AS n FROM seatq.seats s
        WHERE s.state = 'available' AND EXISTS (SELECT 1 FROM seatq.waiting x WHERE x.event_id = s.event_id AND x.class = s.class)
        GROUP BY s.event_id, s.class
    ), ranked AS (
        SELECT w.*, row_number() OVER (PARTITION BY w.event_id, w.class ORDER BY w.request_id) AS place
        FROM seatq.waiting w
    )
    SELECT 'owed_seats_free', format('event %s class %s has %s seats available while request %s (place %s, %s seats) waits',
                                     k.event_id, k.class, f.n, k.request_id, k.place, k.party)
    FROM ranked k
    JOIN free f ON f.event_id = k.event_id AND f.class = k.class
    JOIN seatq.events e ON e.id = k.event_id
    WHERE p_drained AND NOT k.together AND k.party <= f.n
      AND (k.place = 1 OR e.waitlist_order = 'first_fit')
      AND seatq.sale_refusal(e.sales_from, e.sales_until, e.closed_at) IS NULL;
END
$$;

REVOKE ALL ON FUNCTION seatq.request_error(text, jsonb), seatq.join_the_line(), seatq.check_invariants(boolean),
    seatq.line_lock(bigint), seatq.end_waits(bigint), seatq.seats_for(bigint, smallint, int, boolean),
    seatq.serve_line(bigint, boolean), seatq.join_line(bigint, bigint[], text[]),
    seatq.place(bigint, bigint, seatq.request_status, boolean), seatq.line_summary(bigint),
    seatq.check_invariants_before_wait(boolean), seatq.request_error_before_wait(text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION seatq.request_error(text, jsonb), seatq.join_the_line(),
    seatq.request_error_before_wait(text, jsonb), seatq.line_lock(bigint),
    seatq.place(bigint, bigint, seatq.request_status, boolean), seatq.line_summary(bigint)
    TO seatq_producer, seatq_worker, seatq_admin;
GRANT EXECUTE ON FUNCTION seatq.end_waits(bigint), seatq.seats_for(bigint, smallint, int, boolean),
    seatq.serve_line(bigint, boolean), seatq.join_line(bigint, bigint[], text[]),
    seatq.check_invariants(boolean), seatq.check_invariants_before_wait(boolean)
    TO seatq_worker, seatq_admin;
GRANT SELECT, INSERT, UPDATE, DELETE ON seatq.waiting TO seatq_worker;
GRANT ALL ON seatq.waiting TO seatq_admin;

-- On a database already laid out on Citus, the waiting list goes beside its
-- event's seats (core/src/citus.sql lays out a new database the same way).
DO $$
BEGIN
    IF seatq.distributed() THEN
        PERFORM create_distributed_table('seatq.waiting', 'event_id', colocate_with => 'seatq.seats');
    END IF;
END
$$;
