# TSV (jq's @tsv, header line first) as an HTML table, every cell escaped:
#   jq -rRn --arg caption TEXT -f share/report/table.jq < table.tsv
# A cell that is a number (an integer, or a ratio like 1.498; thousands
# separators and a trailing % allowed) is right-aligned (class "n"), an
# integer of 4 digits or more written with thousands separators (800000
# -> 800,000); a first cell "total" makes its row the table's footer row
# (class "total").

# Undo @tsv's escapes (\t \n \r \\) in one pass.
def untsv: gsub("\\\\(?<c>[tnr\\\\])";
	if .c == "t" then "\t" elif .c == "n" then "\n" elif .c == "r" then "\r" else "\\" end);
def commas: if startswith("-") then "-" + (.[1:] | commas)
	elif length > 3 then (.[:-3] | commas) + "," + .[-3:] else . end;
def cell(tag): if test("^-?([0-9]+|[0-9]{1,3}(,[0-9]{3})+)(\\.[0-9]+)?%?$")
	then "<\(tag) class=\"n\">\(if test("^-?[0-9]{4,}$") then commas else . end)</\(tag)>"
	else "<\(tag)>\(@html)</\(tag)>" end;

[inputs | split("\t") | map(untsv)] as $rows |
"<table>",
(if ($ARGS.named.caption // "") != "" then "<caption>\($ARGS.named.caption | @html)</caption>" else empty end),
"<thead><tr>\($rows[0] | map(cell("th")) | join(""))</tr></thead>",
"<tbody>",
($rows[1:][] | "<tr\(if .[0] == "total" then " class=\"total\"" else "" end)>\(map(cell("td")) | join(""))</tr>"),
"</tbody>",
"</table>"
