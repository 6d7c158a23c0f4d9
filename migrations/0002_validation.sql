-- Validation in the database: producers that INSERT directly get the same
-- error codes as the Rust client. This mirrors core/src/validate.rs check for
-- check and in the same order; tests/validation.rs holds the two to the same
-- answers. Change both together.
--
-- Every request a producer inserts runs seatq.request_error in the
-- requests_validate trigger, so it is kept cheap: each embedded query in a
-- PL/pgSQL function costs an executor start, and the common, well-formed
-- request needs none. Unknown fields are found with the `-` operator (the
-- query naming the first one runs only when there is one), named seats are
-- read only when there are some, and the trigger calls the function as an
-- expression rather than through a query.

-- A JSON integer that fits in a bigint (written as an integer: no fraction,
-- no exponent). jsonb prints a number of scale 0 as digits only, never with
-- an exponent, so testing the scale gives the answer a regular expression on
-- the text would, for less.
CREATE FUNCTION seatq.is_json_int(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_typeof(v) = 'number'
       AND scale(v::numeric) = 0
       AND v::numeric BETWEEN -9223372036854775808 AND 9223372036854775807
$$;

-- How a JSON value is named in messages: its type, or a number's text.
CREATE FUNCTION seatq.describe_json(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE jsonb_typeof(v) WHEN 'number' THEN v::text ELSE jsonb_typeof(v) END
$$;

-- The message for number field p_field when its value p_value is outside
-- p_lo..p_hi; NULL when it is in range or absent (NULL). A single
-- expression, inlined into request_error's own.
CREATE FUNCTION seatq.range_error(p_field text, p_value numeric, p_lo numeric, p_hi numeric) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_value NOT BETWEEN p_lo AND p_hi
                THEN format('%s: %s is out of range %s to %s', p_field, p_value, p_lo, p_hi) END
$$;

-- The error code and message of a malformed request; NULLs when it is valid.
CREATE FUNCTION seatq.request_error(p_kind text, p_payload jsonb, OUT code text, OUT message text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    allowed text[];
    required text[];
    for_booking boolean := p_kind IN ('confirm', 'cancel', 'extend');
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
        WHEN 'extend' THEN ARRAY['booking', 'customer', 'hold_seconds']
    END;
    IF allowed IS NULL THEN
        code := 'unknown_kind';
        message := format('unknown request kind "%s": expected hold, book, confirm, cancel or extend', p_kind);
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

    -- hold and extend take hold_seconds; on any other kind it was an unknown field.
    message := seatq.range_error('hold_seconds', (p_payload ->> 'hold_seconds')::numeric, 1, 86400);
    IF message IS NOT NULL THEN code := 'hold_time_out_of_range'; RETURN; END IF;

    IF NOT for_booking THEN
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
        message := seatq.range_error('party', party, 1, 9);
        IF message IS NOT NULL THEN code := 'party_out_of_range'; RETURN; END IF;
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
        message := seatq.range_error('class', (p_payload ->> 'class')::numeric, 1, 32767);
        IF message IS NOT NULL THEN code := 'invalid_request'; RETURN; END IF;
    END IF;

    customer := p_payload ->> 'customer';
    IF btrim(customer, E' \t\n\r') = '' THEN
        code := 'invalid_request';
        message := 'customer: must not be empty';
        RETURN;
    ELSIF char_length(customer) > 200 THEN
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

-- A malformed request is failed the moment it is inserted, with the same
-- code and message a worker would give it; nothing is rejected or lost, and
-- workers never see it.
CREATE FUNCTION seatq.fail_invalid_request() RETURNS trigger
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

CREATE TRIGGER requests_validate BEFORE INSERT ON seatq.requests
    FOR EACH ROW EXECUTE FUNCTION seatq.fail_invalid_request();
