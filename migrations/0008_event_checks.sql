-- An event's sales close after they open. The Rust client and the CLI
-- refuse such an event first (invalid_event, naming the field); this check
-- holds for events written by SQL too. NOT VALID: an event made before it
-- is kept as it is (it is simply never on sale), and only rows written from
-- now on are checked.
ALTER TABLE seatq.events
    ADD CONSTRAINT events_sales_window CHECK (sales_until > sales_from) NOT VALID;

-- Cut event p_event's live holds to p_until, seats and bookings alike, so
-- that none outlives its event's sales: run when sales are closed
-- (seatq event close) or their end is moved earlier (seatq event edit).
-- A hold already ending by then is left as it is.
CREATE FUNCTION seatq.cut_holds(p_event bigint, p_until timestamptz) RETURNS void
LANGUAGE sql AS $$
    UPDATE seatq.seats SET held_until = p_until
    WHERE event_id = p_event AND state = 'held' AND held_until > p_until;
    UPDATE seatq.bookings SET held_until = p_until
    WHERE event_id = p_event AND state = 'held' AND held_until > p_until;
$$;
REVOKE EXECUTE ON FUNCTION seatq.cut_holds(bigint, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION seatq.cut_holds(bigint, timestamptz) TO seatq_admin;
