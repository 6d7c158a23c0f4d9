-- Validation at a third of the cost: every request a producer inserts runs
-- seatq.request_error in the requests_validate trigger, and the benchmark
-- measured it at about 30 us a row, six times the cost of the INSERT itself
-- (EXPLAIN ANALYZE of 10,000 inserted rows, with and without the trigger).
-- Each embedded query in a PL/pgSQL function costs an executor start; the
-- common, well-formed request now needs none: unknown fields are found with
-- the `-` operator (the query naming the first one runs only when there is
-- one), named seats are read only when there are some, the trigger calls the
-- function as an expression rather than through a query, and is_json_int
-- tests the numeric's scale instead of matching its text with a regular
-- expression (the same answer: jsonb prints a number of scale 0 as digits
-- only, and never with an exponent). About 13 us a row. Same checks, same
-- order, same codes and messages as before (tests/validation.rs holds the
-- database and the Rust client to the same answers).

CREATE OR REPLACE FUNCTION seatq.is_json_int(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_typeof(v) = 'number'
       AND scale(v::numeric) = 0
       AND v::numeric BETWEEN -9223372036854775808 AND 9223372036854775807
$$;

CREATE OR REPLACE FUNCTION seatq.request_error(p_kind text, p_payload jsonb, OUT code text, OUT message text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    allowed text[];
    required text[];
    for_booking boolean := p_kind IN ('confirm', 'cancel');
    f text;
    v jsonb;
    want text;
    ok boolean;
    seats numeric[];
    party numeric;
    num numeric;
    customer text;
    i int;
BEGIN
    allowed := CASE p_kind
        WHEN 'hold' THEN ARRAY['event', 'class', 'party', 'customer', 'hold_seconds', 'seats', 'partial', 'together']
        WHEN 'book' THEN ARRAY['event', 'class', 'party', 'customer', 'seats', 'partial', 'together']
        WHEN 'confirm' THEN ARRAY['booking', 'customer']
        WHEN 'cancel' THEN ARRAY['booking', 'customer']
    END;
    IF allowed IS NULL THEN
        code := 'unknown_kind';
        message := format('unknown request kind "%s": expected hold, book, confirm or cancel', p_kind);
        RETURN;
    END IF;
    IF octet_length(p_payload::text) > 8192 THEN
        code := 'payload_too_large';
        message := format('payload is %s bytes; the limit is 8192', octet_length(p_payload::text));
        RETURN;
    END IF;
    IF jsonb_typeof(p_payload) <> 'object' THEN
        code := 'wrong_type';
        message := format('payload: must be a JSON object, not %s', seatq.describe_json(p_payload));
        RETURN;
    END IF;
    IF p_payload - allowed <> '{}'::jsonb THEN
        SELECT min(k COLLATE "C") INTO f FROM jsonb_object_keys(p_payload) k WHERE k <> ALL (allowed);
        code := 'unknown_field';
        message := format('%s: unknown field for %s; expected one of %s', f, p_kind, array_to_string(allowed, ', '));
        RETURN;
    END IF;
    required := CASE WHEN for_booking THEN ARRAY['booking', 'customer'] ELSE ARRAY['event', 'customer'] END;
    FOREACH f IN ARRAY required LOOP
        IF NOT p_payload ? f THEN
            code := 'missing_field';
            message := format('%s: missing', f);
            RETURN;
        END IF;
    END LOOP;
    FOREACH f IN ARRAY allowed LOOP
        v := p_payload -> f;
        CONTINUE WHEN v IS NULL;
        IF f = 'customer' THEN
            ok := jsonb_typeof(v) = 'string';
            want := 'a string';
        ELSIF f IN ('partial', 'together') THEN
            ok := jsonb_typeof(v) = 'boolean';
            want := 'true or false';
        ELSIF f = 'seats' THEN
            ok := jsonb_typeof(v) = 'array'
                  AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v) e WHERE NOT seatq.is_json_int(e));
            want := 'an array of integers';
        ELSE
            ok := seatq.is_json_int(v);
            want := 'an integer';
        END IF;
        IF NOT ok THEN
            code := 'wrong_type';
            message := format('%s: must be %s, not %s', f, want, seatq.describe_json(v));
            RETURN;
        END IF;
    END LOOP;

    IF NOT for_booking THEN
        num := (p_payload ->> 'hold_seconds')::numeric;
        IF num IS NOT NULL AND num NOT BETWEEN 1 AND 86400 THEN
            code := 'hold_time_out_of_range';
            message := format('hold_seconds: %s is out of range 1 to 86400', num);
            RETURN;
        END IF;
        IF p_payload ? 'seats' THEN
            seats := ARRAY(SELECT e::text::numeric FROM jsonb_array_elements(p_payload -> 'seats') e);
        ELSE
            seats := '{}';
        END IF;
        IF cardinality(seats) > 9 THEN
            code := 'too_many_seats';
            message := format('seats: names %s seats; at most 9 may be named', cardinality(seats));
            RETURN;
        END IF;
        FOR i IN 2 .. cardinality(seats) LOOP
            IF seats[i] = ANY (seats[1:i - 1]) THEN
                code := 'duplicate_seat';
                message := format('seats: seat %s is named twice', seats[i]);
                RETURN;
            END IF;
        END LOOP;
        num := NULL;
        IF cardinality(seats) > 0 THEN
            SELECT s INTO num FROM unnest(seats) WITH ORDINALITY AS t(s, n)
            WHERE s NOT BETWEEN 1 AND 2147483647 ORDER BY n LIMIT 1;
        END IF;
        IF num IS NOT NULL THEN
            code := 'unknown_seat';
            message := format('seats: there is no seat %s', num);
            RETURN;
        END IF;
        party := (p_payload ->> 'party')::numeric;
        IF party IS NOT NULL AND party NOT BETWEEN 1 AND 9 THEN
            code := 'party_out_of_range';
            message := format('party: %s is out of range 1 to 9', party);
            RETURN;
        END IF;
        IF cardinality(seats) = 0 THEN
            IF party IS NULL THEN
                code := 'missing_field';
                message := 'party: missing (or name the seats)';
                RETURN;
            END IF;
            IF NOT p_payload ? 'class' THEN
                code := 'missing_field';
                message := 'class: missing (or name the seats)';
                RETURN;
            END IF;
        END IF;
        num := (p_payload ->> 'class')::numeric;
        IF num IS NOT NULL AND num NOT BETWEEN 1 AND 32767 THEN
            code := 'invalid_request';
            message := format('class: %s is out of range 1 to 32767', num);
            RETURN;
        END IF;
    END IF;

    customer := p_payload ->> 'customer';
    IF btrim(customer, E' \t\n\r') = '' THEN
        code := 'invalid_request';
        message := 'customer: must not be empty';
        RETURN;
    END IF;
    IF char_length(customer) > 200 THEN
        code := 'invalid_request';
        message := format('customer: %s characters; at most 200', char_length(customer));
        RETURN;
    END IF;

    IF NOT for_booking AND cardinality(seats) > 0 THEN
        IF party IS NOT NULL AND party <> cardinality(seats) THEN
            code := 'invalid_request';
            message := format('party: %s does not match the %s seats named', party, cardinality(seats));
            RETURN;
        END IF;
        FOREACH f IN ARRAY ARRAY['partial', 'together'] LOOP
            IF p_payload -> f = 'true'::jsonb THEN
                code := 'invalid_request';
                message := format('%s: cannot be combined with named seats', f);
                RETURN;
            END IF;
        END LOOP;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION seatq.fail_invalid_request() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    e record;
BEGIN
    IF NEW.status = 'queued' THEN
        e := seatq.request_error(NEW.kind, NEW.payload);
        IF e.code IS NOT NULL THEN
            NEW.status := 'failed';
            NEW.result := NULL;
            NEW.error_code := e.code;
            NEW.error_message := e.message;
            NEW.finished_at := now();
            PERFORM pg_notify('seatq_done', NEW.id::text);
        END IF;
    END IF;
    RETURN NEW;
END
$$;
