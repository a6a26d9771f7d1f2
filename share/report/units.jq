# Number formats shared by report.html's queries (and by report.js, which
# writes the same forms): 1234567 -> "1,234,567"; bytes as B, KiB, MiB or
# GiB with one decimal; cycles with thousands separators.
def commas: if . < 0 then "-" + (-. | commas)
	else (. | floor | tostring) as $i | (. - floor) as $f |
	($i | [explode | reverse | _nwise(3) | reverse | implode] | reverse | join(",")) end;
def dec(n): (pow(10; n)) as $p | (. * $p | round) as $t |
	"\($t / $p | floor | commas).\(($t % $p) + $p | tostring | .[1:])";
def bytes: if . < 1024 then "\(commas) B"
	elif . < 1048576 then "\(. / 1024 | dec(1)) KiB"
	elif . < 1073741824 then "\(. / 1048576 | dec(1)) MiB"
	else "\(. / 1073741824 | dec(1)) GiB" end;
# "12.5 KiB (12,832 B)", or "880 B" when that is all
def bytes_exact: if . < 1024 then bytes else "\(bytes) (\(commas) B)" end;
def cycles: "\(commas) cycles";
