-- Allocation in the database: the spread start of a big claim. (The
-- head-first claim, one index seek per (event, class), is a statement of the
-- worker's own: worker/src/sql/allocation.rs.)
--
-- A big claim on one (event, class) starts at a random seat of the cheapest
-- price level instead of at its head.
--
-- When many batches want the same event at once (a hot event), every one of
-- them scanning the price level from its first seat steps over the seats all
-- the others hold: a lock-manager call per seat, quadratic in the number of
-- concurrent batches, and a long scan whose snapshot goes stale, so that it
-- runs into seats booked since it began and can end up waiting for whoever
-- locked their new versions (PostgreSQL 15 follows the update chain with a
-- blocking wait even under SKIP LOCKED, in heap_lock_updated_tuple: "while
-- locking updated version of tuple" in the log with log_lock_waits on).
-- Starting at a random point of the level's free range, concurrent batches
-- mostly take different runs of seats. Every seat of a level has the same
-- price, so cheapest-first still holds: the rest of the level is taken
-- (wrapping round to its head) before any dearer seat. Dearer levels are
-- taken head first.
--
-- The worker calls it for groups of 32 seats or more (SPREAD_FROM_NEED);
-- small ones keep the single head-first seek (two more probes would cost
-- more than the collisions they avoid).
CREATE FUNCTION seatq.lock_cheapest_spread(p_event bigint, p_class smallint, p_need int)
RETURNS TABLE (seat_no int, class smallint, row_no int, pos int, price_cents int, section text, row_label text,
               label text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_price int;
    v_first int;
    v_last int;
    v_start int;
    v_lo bigint;
    v_hi bigint;
    v_from bigint;
    v_to bigint;
    v_got int;
    v_left int := p_need;
BEGIN
    -- The cheapest level with a free seat, and where its free seats begin
    -- and end (held seats count: a lapsed hold is free).
    SELECT s.price_cents, s.seat_no INTO v_price, v_first
    FROM seatq.seats s
    WHERE s.event_id = p_event AND s.class = p_class
      AND seatq.is_free(s.state, s.held_until)
    ORDER BY s.price_cents, s.seat_no
    LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT s.seat_no INTO v_last
    FROM seatq.seats s
    WHERE s.event_id = p_event AND s.class = p_class AND s.price_cents = v_price
      AND seatq.is_free(s.state, s.held_until)
    ORDER BY s.price_cents DESC, s.seat_no DESC
    LIMIT 1;
    -- (Each probe has its own snapshot: if the level filled up in between,
    -- start at its head.)
    v_start := CASE WHEN v_last >= v_first
                    THEN v_first + floor(random() * (v_last - v_first + 1))::int
                    ELSE v_first END;

    -- Three stretches, each (lowest price, highest price, first seat, last
    -- seat) taken cheapest first: the level from the start to its end, the
    -- level from its head round to the start, then every dearer seat.
    -- (bigint, so that the bounds never overflow.)
    FOR v_lo, v_hi, v_from, v_to IN
        VALUES (v_price::bigint, v_price::bigint, v_start::bigint, 2147483647::bigint),
               (v_price, v_price, 0, v_start - 1),
               (v_price::bigint + 1, 2147483647, 0, 2147483647)
    LOOP
        RETURN QUERY
        SELECT s.seat_no, s.class, s.row_no, s.pos, s.price_cents, s.section, s.row_label, s.label
        FROM seatq.seats s
        WHERE s.event_id = p_event AND s.class = p_class
          AND s.price_cents BETWEEN v_lo AND v_hi AND s.seat_no BETWEEN v_from AND v_to
          AND seatq.is_free(s.state, s.held_until)
        ORDER BY s.price_cents, s.seat_no
        LIMIT v_left
        FOR UPDATE OF s SKIP LOCKED;
        GET DIAGNOSTICS v_got = ROW_COUNT;
        v_left := v_left - v_got;
        EXIT WHEN v_left = 0;
    END LOOP;
END
$$;
