-- Wireshark dissector for the smartt wire format, version 1 (docs/wire.md; the code is
-- transport/wire). Every packet is the payload of one UDP datagram, big-endian.
--
--   tshark -X lua_script:docs/smartt.lua -r leaf0-spine1.pcap
--   wireshark -X lua_script:docs/smartt.lua leaf0-spine1.pcap
--   (or copy it to ~/.local/lib/wireshark/plugins/)
--
-- It takes UDP port 23600 (the daemon's default listen port; a preference) and, by
-- heuristic, any UDP datagram that
-- starts like a version-1 packet. Captures with a small snap length (the testbed's pcaps
-- keep 128 bytes of each frame) still hold every header; the length rules below use the
-- datagram's length, not what was captured.

local p = Proto("smartt", "smartt transport")

local types = { [1] = "DATA", [2] = "ACK", [3] = "NACK", [4] = "PROBE", [5] = "CLOSE",
	[6] = "CLOSE_ACK", [7] = "RESET", [8] = "PULL" }
-- Fixed lengths (docs/wire.md "Packet types and sizes").
local DATA_HDR, ACK_FIXED, NACK_LEN, PROBE_LEN, CLOSE_LEN, COMMON = 64, 68, 48, 32, 28, 24
local PULL_LEN = 32
-- The authentication trailer of a packet with FlagSealed (docs/wire.md "Sealed packets").
local SEAL = 36

local f = p.fields
f.ver       = ProtoField.uint8("smartt.ver", "Version", base.DEC, nil, 0xf0)
f.type      = ProtoField.uint8("smartt.type", "Type", base.DEC, types, 0x0f)
f.flags     = ProtoField.uint8("smartt.flags", "Flags", base.HEX)
f.f_retx    = ProtoField.bool("smartt.flags.retx", "Retx (DATA) / GoBack (NACK) / Bundle (ACK)", 8, nil, 0x01)
f.f_last    = ProtoField.bool("smartt.flags.last", "Last", 8, nil, 0x02)
f.f_ackreq  = ProtoField.bool("smartt.flags.ackreq", "AckReq", 8, nil, 0x04)
f.f_trimmed = ProtoField.bool("smartt.flags.trimmed", "Trimmed", 8, nil, 0x08)
f.f_ce      = ProtoField.bool("smartt.flags.ce", "CE", 8, nil, 0x10)
f.f_cleanev = ProtoField.bool("smartt.flags.cleanev", "CleanEV", 8, nil, 0x20)
f.f_sealed  = ProtoField.bool("smartt.flags.sealed", "Sealed", 8, nil, 0x40)
f.f_int     = ProtoField.bool("smartt.flags.int", "INT", 8, nil, 0x80)
f.ev        = ProtoField.uint16("smartt.ev", "EV", base.DEC)
f.replyport = ProtoField.uint16("smartt.reply_port", "ReplyPort", base.DEC)
f.reserved  = ProtoField.uint16("smartt.reserved", "Reserved", base.HEX)
f.dstconn   = ProtoField.uint64("smartt.dst_conn", "DstConn", base.HEX)
f.srcconn   = ProtoField.uint64("smartt.src_conn", "SrcConn", base.HEX)
-- DATA
f.psn         = ProtoField.uint32("smartt.psn", "PSN", base.DEC)
f.ackfloor    = ProtoField.uint32("smartt.ack_floor", "AckFloor", base.DEC)
f.msgid       = ProtoField.uint32("smartt.msg_id", "MsgID", base.DEC)
f.msglen      = ProtoField.uint32("smartt.msg_len", "MsgLen", base.DEC)
f.offset      = ProtoField.uint32("smartt.offset", "Offset", base.DEC)
f.payloadlen  = ProtoField.uint16("smartt.payload_len", "PayloadLen", base.DEC)
f.streamstart = ProtoField.uint64("smartt.stream_start", "StreamStart", base.DEC)
f.txtime      = ProtoField.int64("smartt.tx_time", "TxTime (ns)", base.DEC)
f.payload     = ProtoField.bytes("smartt.payload", "Payload")
f.trimmed     = ProtoField.bool("smartt.trimmed", "Trimmed (flag set or payload short)")
-- ACK
f.cumpsn     = ProtoField.uint32("smartt.cum_psn", "CumPSN", base.DEC)
f.sackbase   = ProtoField.uint32("smartt.sack_base", "SackBase", base.DEC)
f.ackedpsn   = ProtoField.uint32("smartt.acked_psn", "AckedPSN", base.DEC)
f.echoev     = ProtoField.uint16("smartt.echo_ev", "EchoEV", base.DEC)
f.sackwords  = ProtoField.uint8("smartt.sack_words", "SackWords", base.DEC)
f.numclean   = ProtoField.uint8("smartt.num_clean", "NumClean", base.DEC)
f.echotxtime = ProtoField.int64("smartt.echo_tx_time", "EchoTxTime (ns)", base.DEC)
f.holdtime   = ProtoField.uint32("smartt.hold_time", "HoldTime (ns)", base.DEC)
f.cecount    = ProtoField.uint16("smartt.ce_count", "CECount", base.DEC)
f.pktcount   = ProtoField.uint16("smartt.pkt_count", "PktCount", base.DEC)
f.delivered  = ProtoField.uint64("smartt.delivered", "Delivered", base.DEC)
f.window     = ProtoField.uint32("smartt.window", "Window", base.DEC)
f.sack       = ProtoField.uint64("smartt.sack", "Sack word", base.HEX)
f.sacked     = ProtoField.string("smartt.sacked", "Received PSNs")
f.cleanev    = ProtoField.uint16("smartt.clean_ev", "CleanEV", base.DEC)
-- NACK (PSN, CumPSN, EchoEV, HoldTime, EchoTxTime as above), PROBE, CLOSE
f.probetx = ProtoField.int64("smartt.probe_tx_time", "TxTime (ns)", base.DEC)
f.reason  = ProtoField.uint32("smartt.reason", "Reason", base.DEC)
f.granted = ProtoField.uint64("smartt.granted", "Granted (bytes, cumulative)", base.DEC)
-- INT block (FlagINT, docs/wire.md "INT")
f.int_n     = ProtoField.uint8("smartt.int.n", "INT records", base.DEC)
f.int_cap   = ProtoField.uint8("smartt.int.cap", "INT slots", base.DEC)
f.int_flags = ProtoField.uint8("smartt.int.flags", "INT flags (1: overflow)", base.HEX)
f.int_hop   = ProtoField.bytes("smartt.int.hop", "INT hop")
f.int_ts    = ProtoField.uint32("smartt.int.ts", "TS (ns, low 32 bits)", base.DEC)
f.int_tx    = ProtoField.uint32("smartt.int.tx_bytes", "TxBytes (low 32 bits)", base.DEC)
f.int_qlen  = ProtoField.uint32("smartt.int.qlen", "QLen (bytes)", base.DEC)
f.int_rate  = ProtoField.uint32("smartt.int.rate", "Rate (Mbit/s)", base.DEC)
-- Seal trailer (FlagSealed)
f.seal       = ProtoField.bytes("smartt.seal", "Seal")
f.seal_tag   = ProtoField.bytes("smartt.seal.tag", "GCM tag")
f.seal_start = ProtoField.uint32("smartt.seal.start", "Session start (s)", base.DEC)
f.seal_rand  = ProtoField.uint64("smartt.seal.random", "Session random", base.HEX)
f.seal_check = ProtoField.uint32("smartt.seal.check", "Session check", base.HEX)
f.seal_ctr   = ProtoField.uint32("smartt.seal.counter", "Counter", base.DEC)

local e_version = ProtoExpert.new("smartt.bad_version", "Version is not 1 (ErrVersion)", expert.group.MALFORMED, expert.severity.ERROR)
local e_type    = ProtoExpert.new("smartt.bad_type", "Unknown packet type (ErrType)", expert.group.MALFORMED, expert.severity.ERROR)
local e_flags   = ProtoExpert.new("smartt.bad_flags", "FlagINT (0x80) on a type without an INT block (ErrFlags)", expert.group.MALFORMED, expert.severity.ERROR)
local e_int     = ProtoExpert.new("smartt.bad_int", "INT block malformed or truncated (ErrINT)", expert.group.MALFORMED, expert.severity.ERROR)
local e_conn    = ProtoExpert.new("smartt.bad_conn", "Connection ID 0 where not allowed (ErrConnID)", expert.group.MALFORMED, expert.severity.ERROR)
local e_short   = ProtoExpert.new("smartt.short", "Shorter than its type's fixed length (ErrShort)", expert.group.MALFORMED, expert.severity.ERROR)
local e_length  = ProtoExpert.new("smartt.bad_length", "Length inconsistent (ErrLength)", expert.group.MALFORMED, expert.severity.ERROR)
local e_sackw   = ProtoExpert.new("smartt.bad_sack_words", "SackWords not in 1..4 (ErrSackWidth)", expert.group.MALFORMED, expert.severity.ERROR)
local e_clean   = ProtoExpert.new("smartt.bad_clean", "FlagCleanEV and NumClean disagree, or NumClean > 64 (ErrCleanEVs)", expert.group.MALFORMED, expert.severity.ERROR)
local e_trim    = ProtoExpert.new("smartt.trimmed_note", "Trimmed by a switch", expert.group.SEQUENCE, expert.severity.NOTE)
p.experts = { e_version, e_type, e_flags, e_int, e_conn, e_short, e_length, e_sackw, e_clean, e_trim }

local prefs = p.prefs
prefs.port = Pref.uint("UDP port", 23600, "UDP port of smartt daemons")

-- bitset lists the set bits of one SACK word (8 bytes, big-endian; bit i is bit i%8 of
-- the word's byte 7-i/8) as PSNs base+i, ranges collapsed.
local function bitset(tvb, off, base, first)
	local out, runStart, prev = {}, nil, nil
	local function flush()
		if runStart ~= nil then
			if runStart == prev then
				out[#out + 1] = tostring(runStart)
			else
				out[#out + 1] = runStart .. "-" .. prev
			end
		end
	end
	for i = 0, 63 do
		local byte = tvb(off + 7 - math.floor(i / 8), 1):uint()
		if math.floor(byte / 2 ^ (i % 8)) % 2 == 1 then
			local psn = (base + first + i) % 4294967296
			if prev ~= nil and psn == (prev + 1) % 4294967296 then
				prev = psn
			else
				flush()
				runStart, prev = psn, psn
			end
		end
	end
	flush()
	return table.concat(out, ",")
end

local function dissect(tvb, pinfo, root)
	local len = tvb:reported_length_remaining() -- the datagram, even if capture cut it
	if tvb:len() < 1 then return 0 end
	pinfo.cols.protocol = "SMARTT"
	local t = root:add(p, tvb(), "smartt transport")
	local b0 = tvb(0, 1):uint()
	local ver, typ = math.floor(b0 / 16), b0 % 16
	local tname = types[typ] or ("type " .. typ)
	t:add(f.ver, tvb(0, 1))
	local ti = t:add(f.type, tvb(0, 1))
	if ver ~= 1 then t:add_proto_expert_info(e_version) end
	if types[typ] == nil then ti:add_proto_expert_info(e_type) end
	if len < COMMON then
		t:add_proto_expert_info(e_short)
		pinfo.cols.info = tname .. " [short]"
		return len
	end
	local flags = tvb(1, 1):uint()
	local ft = t:add(f.flags, tvb(1, 1))
	ft:add(f.f_retx, tvb(1, 1)); ft:add(f.f_last, tvb(1, 1)); ft:add(f.f_ackreq, tvb(1, 1))
	ft:add(f.f_trimmed, tvb(1, 1)); ft:add(f.f_ce, tvb(1, 1)); ft:add(f.f_cleanev, tvb(1, 1))
	ft:add(f.f_sealed, tvb(1, 1)); ft:add(f.f_int, tvb(1, 1))
	if flags >= 0x80 and typ ~= 1 and typ ~= 2 then ft:add_proto_expert_info(e_flags) end
	local function flag(mask) return math.floor(flags / mask) % 2 == 1 end
	-- intblock shows the INT block at o of a packet of len bytes and returns its length
	-- (the ACK's has N records, a DATA's Cap slots), or nil if it is malformed.
	local function intblock(o, ack)
		if len < o + 4 or tvb:len() < o + 4 then t:add_proto_expert_info(e_int); return nil end
		local n, cap, fl = tvb(o, 1):uint(), tvb(o + 1, 1):uint(), tvb(o + 2, 1):uint()
		local it = t:add(p, tvb(o, math.min(4 + 16 * cap, tvb:len() - o)), "INT")
		it:add(f.int_n, tvb(o, 1)); it:add(f.int_cap, tvb(o + 1, 1)); it:add(f.int_flags, tvb(o + 2, 1))
		if n > cap or cap > 5 or (not ack and cap == 0) or (ack and cap ~= n) or fl > 1 or len < o + 4 + 16 * cap then
			it:add_proto_expert_info(e_int)
			return nil
		end
		for i = 0, n - 1 do
			local r = o + 4 + 16 * i
			if tvb:len() >= r + 16 then
				local ht = it:add(f.int_hop, tvb(r, 16))
				ht:set_text("Hop " .. i .. ": qlen " .. tvb(r + 8, 4):uint() .. " B, rate " .. tvb(r + 12, 4):uint() .. " Mbit/s")
				ht:add(f.int_ts, tvb(r, 4)); ht:add(f.int_tx, tvb(r + 4, 4))
				ht:add(f.int_qlen, tvb(r + 8, 4)); ht:add(f.int_rate, tvb(r + 12, 4))
			end
		end
		return 4 + 16 * cap
	end
	-- A sealed packet ends in the trailer, except a trimmed DATA (the switch cut it off):
	-- the body rules below apply to the packet without it.
	local dlen, trailer = len, nil
	if flag(0x40) then
		local whole = len >= COMMON + SEAL
		if typ == 1 then
			whole = len >= DATA_HDR and tvb:len() >= 46 and not flag(0x08) and len >= DATA_HDR + tvb(44, 2):uint() + SEAL
		end
		if whole then
			len = len - SEAL
			trailer = len
		end
	end
	t:add(f.ev, tvb(2, 2))
	t:add(f.replyport, tvb(4, 2))
	t:add(f.reserved, tvb(6, 2))
	local dt = t:add(f.dstconn, tvb(8, 8))
	local st = t:add(f.srcconn, tvb(16, 8))
	local dst0 = tvb(8, 8):uint64() == UInt64(0)
	if tvb(16, 8):uint64() == UInt64(0) then st:add_proto_expert_info(e_conn) end
	-- ACK, NACK, CLOSE_ACK, RESET and PULL always name the receiver's connection.
	if dst0 and (typ == 2 or typ == 3 or typ == 6 or typ == 7 or typ == 8) then dt:add_proto_expert_info(e_conn) end
	local info = tname .. " ev=" .. tvb(2, 2):uint()

	local function need(n)
		if len < n then t:add_proto_expert_info(e_short); return false end
		return true
	end
	local bundled = nil -- an ACK's length when a bundled DATA packet follows it
	if typ == 1 then -- DATA
		if need(DATA_HDR) then
			t:add(f.psn, tvb(24, 4)); t:add(f.ackfloor, tvb(28, 4)); t:add(f.msgid, tvb(32, 4))
			local ml = t:add(f.msglen, tvb(36, 4)); t:add(f.offset, tvb(40, 4))
			local pl = t:add(f.payloadlen, tvb(44, 2)); t:add(f.reserved, tvb(46, 2))
			t:add(f.streamstart, tvb(48, 8)); t:add(f.txtime, tvb(56, 8))
			local msglen, off, plen = tvb(36, 4):uint(), tvb(40, 4):uint(), tvb(44, 2):uint()
			if msglen == 0 or plen == 0 or off + plen > msglen then ml:add_proto_expert_info(e_length) end
			local hdr = DATA_HDR
			if flag(0x80) then
				local n = intblock(DATA_HDR, false)
				if n ~= nil then hdr = hdr + n end
			end
			local present = len - hdr
			if present > plen then pl:add_proto_expert_info(e_length) end
			if present > 0 and tvb:len() > hdr then
				t:add(f.payload, tvb(hdr, math.min(present, tvb:len() - hdr)))
			end
			local trimmed = flag(0x08) or present < plen
			local tt = t:add(f.trimmed, trimmed)
			tt:set_generated()
			if trimmed then tt:add_proto_expert_info(e_trim) end
			info = info .. " psn=" .. tvb(24, 4):uint() .. " msg=" .. tvb(32, 4):uint() .. " off=" .. off ..
				" len=" .. plen .. "/" .. msglen
			if flag(0x01) then info = info .. " RETX" end
			if flag(0x02) then info = info .. " LAST" end
			if trimmed then info = info .. " TRIMMED" end
			if flag(0x40) and trailer == nil then info = info .. " (seal cut off)" end
		end
	elseif typ == 2 then -- ACK
		if need(ACK_FIXED) then
			t:add(f.cumpsn, tvb(24, 4)); t:add(f.sackbase, tvb(28, 4)); t:add(f.ackedpsn, tvb(32, 4))
			t:add(f.echoev, tvb(36, 2))
			local swt = t:add(f.sackwords, tvb(38, 1)); local nct = t:add(f.numclean, tvb(39, 1))
			t:add(f.echotxtime, tvb(40, 8)); t:add(f.holdtime, tvb(48, 4))
			t:add(f.cecount, tvb(52, 2)); t:add(f.pktcount, tvb(54, 2))
			t:add(f.delivered, tvb(56, 8)); t:add(f.window, tvb(64, 4))
			local sw, nc = tvb(38, 1):uint(), tvb(39, 1):uint()
			if sw < 1 or sw > 4 then swt:add_proto_expert_info(e_sackw) end
			if nc > 64 or (nc > 0) ~= flag(0x20) then nct:add_proto_expert_info(e_clean) end
			local want = ACK_FIXED + 8 * sw + 2 * nc
			if flag(0x80) then
				local n = intblock(want, true)
				if n ~= nil then want = want + n else want = len end -- reported as ErrINT
			end
			if len < want then
				t:add_proto_expert_info(e_short)
			elseif len > want and flag(0x01) and trailer == nil then
				bundled = want -- FlagBundle: a DATA packet follows (docs/wire.md, "Bundles")
			elseif len > want then
				t:add_proto_expert_info(e_length)
			end
			local base = tvb(28, 4):uint()
			for w = 0, math.min(sw, 4) - 1 do
				local o = ACK_FIXED + 8 * w
				if tvb:len() >= o + 8 then
					local wt = t:add(f.sack, tvb(o, 8))
					wt:add(f.sacked, tvb(o, 8), bitset(tvb, o, base, 64 * w))
				end
			end
			for i = 0, nc - 1 do
				local o = ACK_FIXED + 8 * sw + 2 * i
				if tvb:len() >= o + 2 then t:add(f.cleanev, tvb(o, 2)) end
			end
			info = info .. " cum=" .. tvb(24, 4):uint() .. " acked=" .. tvb(32, 4):uint() ..
				" ce=" .. tvb(52, 2):uint() .. "/" .. tvb(54, 2):uint()
			if flag(0x10) then info = info .. " CE" end
		end
	elseif typ == 3 then -- NACK
		if need(NACK_LEN) then
			t:add(f.psn, tvb(24, 4)); t:add(f.cumpsn, tvb(28, 4)); t:add(f.echoev, tvb(32, 2))
			t:add(f.reserved, tvb(34, 2)); t:add(f.holdtime, tvb(36, 4)); t:add(f.echotxtime, tvb(40, 8))
			info = info .. " psn=" .. tvb(24, 4):uint() .. " cum=" .. tvb(28, 4):uint()
			if flag(0x10) then info = info .. " CE" end
		end
	elseif typ == 4 then -- PROBE
		if need(PROBE_LEN) then t:add(f.probetx, tvb(24, 8)) end
	elseif typ == 5 then -- CLOSE
		if need(CLOSE_LEN) then
			t:add(f.reason, tvb(24, 4))
			info = info .. " reason=" .. tvb(24, 4):uint()
		end
	elseif typ == 8 then -- PULL
		if need(PULL_LEN) then
			local g = t:add(f.granted, tvb(24, 8))
			if tvb(24, 8):uint64() == UInt64(0) then g:add_proto_expert_info(e_length) end
			info = info .. " granted=" .. tostring(tvb(24, 8):uint64())
		end
	end
	if trailer ~= nil then
		info = info .. " SEALED"
		if tvb:len() >= trailer + SEAL then
			local o = trailer
			local st = t:add(f.seal, tvb(o, SEAL))
			st:add(f.seal_tag, tvb(o, 16)); st:add(f.seal_start, tvb(o + 16, 4)); st:add(f.seal_rand, tvb(o + 20, 8))
			st:add(f.seal_check, tvb(o + 28, 4)); st:add(f.seal_ctr, tvb(o + 32, 4))
			info = info .. " ctr=" .. tvb(o + 32, 4):uint()
		end
	end
	if bundled ~= nil then
		t:set_len(bundled)
		dissect(tvb(bundled):tvb(), pinfo, root)
		info = info .. " + " .. tostring(pinfo.cols.info)
	end
	pinfo.cols.info = info
	return dlen
end

function p.dissector(tvb, pinfo, root)
	return dissect(tvb, pinfo, root)
end

-- heuristic: a version-1 type byte, FlagINT only on DATA and ACK, a non-zero SrcConn.
local function heur(tvb, pinfo, root)
	if tvb:len() < COMMON then return false end
	local b0 = tvb(0, 1):uint()
	if b0 < 0x11 or b0 > 0x18 or (tvb(1, 1):uint() >= 0x80 and b0 > 0x12) or tvb(16, 8):uint64() == UInt64(0) then
		return false
	end
	dissect(tvb, pinfo, root)
	pinfo.conversation = p
	return true
end
p:register_heuristic("udp", heur)

local current = 0
function p.init()
	local udp = DissectorTable.get("udp.port")
	if current ~= 0 then udp:remove(current, p) end
	current = prefs.port
	udp:add(current, p)
end
