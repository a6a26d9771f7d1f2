// report.html's instrument (report.sh inlines it): draws the data of
// <script id="amp-data"> (report/data.json, share/report/data.jq):
//   - the timeline: the critical path as one lane of phases (sync,
//     exchange, local copies) and compute steps in program order, and a
//     table of them with each phase's floor; clicking a phase selects it;
//   - the selected phase's per-tile heatmaps (received, sent, fragments,
//     and busy cycles when tiles.tsv is version 2), and the program's
//     (table bytes, SRAM peak, fragments, received);
//   - the trace's tile lanes (<script id="amp-trace">), when make trace wrote one;
//   - memory over program steps, and the worst tile's tensors;
//   - a search over the movement graph.
// Every heatmap is scaled to its limit; tiles over it are red with a black
// outline and counted in the caption. Hovering a tile shows its number and
// value in #tip (data-tile, data-value: the raw figure).
// Nothing here reads the clock, the network or the page's address.
'use strict';
(function () {
	var D = JSON.parse(document.getElementById('amp-data').textContent);
	var M = D.machine, cols = D.grid.cols, rows = D.grid.rows;
	var tip = document.getElementById('tip');

	// ---- number formats (as share/report/units.jq) ----
	function commas(n) {
		var s = String(Math.floor(Math.abs(n))), out = '';
		while (s.length > 3) { out = ',' + s.slice(-3) + out; s = s.slice(0, -3); }
		return (n < 0 ? '-' : '') + s + out;
	}
	function dec(x, n) {
		var p = Math.pow(10, n), t = Math.round(x * p), f = String(t % p + p).slice(1);
		return commas(Math.floor(t / p)) + '.' + f;
	}
	function bytes(n) {
		if (n < 1024) return commas(n) + ' B';
		if (n < 1048576) return dec(n / 1024, 1) + ' KiB';
		if (n < 1073741824) return dec(n / 1048576, 1) + ' MiB';
		return dec(n / 1073741824, 1) + ' GiB';
	}
	function bytesExact(n) { return n < 1024 ? bytes(n) : bytes(n) + ' (' + commas(n) + ' B)'; }
	function us(c) { return M.clock_hz ? dec(c * 1e6 / M.clock_hz, 3) + ' µs' : ''; }
	function cycles(c) { var t = us(c); return commas(c) + ' cycles' + (t ? ' (' + t + ')' : ''); }
	var units = {
		bytes: bytesExact,
		count: function (n) { return commas(n); },
		cycles: cycles
	};

	function el(tag, attrs, text) {
		var e = document.createElement(tag), k;
		for (k in attrs || {}) e.setAttribute(k, attrs[k]);
		if (text !== undefined) e.textContent = text;
		return e;
	}
	var SVG = 'http://www.w3.org/2000/svg';
	function svg(tag, attrs) {
		var e = document.createElementNS(SVG, tag), k;
		for (k in attrs || {}) e.setAttribute(k, attrs[k]);
		return e;
	}

	// ---- heatmaps ----
	var ramp = [[0x44, 0x01, 0x54], [0x3b, 0x52, 0x8b], [0x21, 0x91, 0x8c], [0x5e, 0xc9, 0x62], [0xfd, 0xe7, 0x25]];
	function colour(f) {
		var x = Math.max(0, Math.min(1, f)) * (ramp.length - 1), i = Math.min(ramp.length - 2, Math.floor(x)),
			u = x - i, a = ramp[i], b = ramp[i + 1];
		return 'rgb(' + [0, 1, 2].map(function (k) { return Math.round(a[k] + (b[k] - a[k]) * u); }).join(',') + ')';
	}
	var cell = Math.max(4, Math.min(14, Math.floor(400 / cols)));

	// heatmap(spec): a figure of the tiles as a grid, tile t at column t mod
	// cols, row t div cols. spec: id, title, name (of the value), unit (a key
	// of units), values (an array, undefined where the tile holds nothing),
	// limit (the top of the scale) and limitText (what the limit is).
	function heatmap(spec) {
		var fig = el('figure', {'class': 'heatmap', id: spec.id});
		var cv = el('canvas', {width: cols * cell, height: rows * cell,
			'data-cols': cols, 'data-cell': cell, 'data-name': spec.name});
		var g = cv.getContext('2d'), over = 0, max = -1, maxTile = -1, held = 0, t, v, x, y;
		g.fillStyle = '#ffffff';
		g.fillRect(0, 0, cv.width, cv.height);
		for (t = 0; t < M.tiles; t++) {
			v = spec.values[t];
			x = (t % cols) * cell; y = Math.floor(t / cols) * cell;
			if (v !== undefined && v !== null) {
				held++;
				if (v > max) { max = v; maxTile = t; }
			}
			if (v === undefined || v === null || v === 0) g.fillStyle = '#e8e8e8';
			else if (spec.limit > 0 && v > spec.limit) { over++; g.fillStyle = '#ff2020'; }
			else g.fillStyle = colour(spec.limit > 0 ? v / spec.limit : 1);
			g.fillRect(x, y, cell - 1, cell - 1);
			if (spec.limit > 0 && v > spec.limit) {
				g.strokeStyle = '#000'; g.lineWidth = 1;
				g.strokeRect(x + 0.5, y + 0.5, cell - 2, cell - 2);
			}
		}
		var fmt = units[spec.unit];
		var readout = el('div', {'class': 'readout note'}, 'hover a tile');
		cv.addEventListener('mousemove', function (ev) {
			var r = cv.getBoundingClientRect(), c = Math.floor((ev.clientX - r.left) / cell),
				w = Math.floor((ev.clientY - r.top) / cell), tt = w * cols + c;
			if (c < 0 || c >= cols || tt < 0 || tt >= M.tiles) { tip.style.display = 'none'; return; }
			var val = spec.values[tt], held = val !== undefined && val !== null;
			var text = 'tile ' + tt + ': ' + spec.name + ' ' + (held ? fmt(val) : 'nothing');
			tip.textContent = text;
			tip.dataset.tile = tt;
			tip.dataset.value = held ? val : 0;
			tip.dataset.map = spec.id;
			tip.style.display = 'block';
			tip.style.left = (ev.clientX + 12) + 'px';
			tip.style.top = (ev.clientY + 12) + 'px';
			readout.textContent = text;
			mark.style.left = (c * cell) + 'px';
			mark.style.top = (w * cell) + 'px';
			mark.style.display = 'block';
		});
		cv.addEventListener('mouseleave', function () { tip.style.display = 'none'; mark.style.display = 'none'; });
		fig.appendChild(el('figcaption', {}, spec.title));
		var wrap = el('div', {'class': 'grid'}), mark = el('div', {'class': 'mark'});
		mark.style.width = mark.style.height = (cell - 1) + 'px';
		wrap.appendChild(cv);
		wrap.appendChild(mark);
		fig.appendChild(wrap);
		var sc = el('div', {'class': 'scale'});
		sc.appendChild(el('span', {}, '0'));
		sc.appendChild(el('span', {'class': 'ramp'}));
		sc.appendChild(el('span', {}, fmt(spec.limit) + ' (' + spec.limitText + ')'));
		sc.appendChild(el('span', {'class': 'swatch', style: 'background:#ff2020;border-color:#000'}));
		sc.appendChild(el('span', {}, 'over'));
		sc.appendChild(el('span', {'class': 'swatch', style: 'background:#e8e8e8'}));
		sc.appendChild(el('span', {}, 'none'));
		fig.appendChild(sc);
		var cap = el('figcaption', {'class': 'stats'}, held ? 'max ' + fmt(max) + ' on tile ' + maxTile +
			', ' + commas(held) + ' tiles hold any; ' : 'no tile holds any; ');
		var o = el('span', {'class': over ? 'over' : ''}, over + ' tile' + (over === 1 ? '' : 's') + ' over the limit');
		o.dataset.over = over;
		cap.appendChild(o);
		fig.appendChild(cap);
		fig.appendChild(readout);
		return fig;
	}

	// values(rows, k): an array by tile of column k of [tile, ...] rows
	function values(list, k) {
		var a = new Array(M.tiles);
		list.forEach(function (r) { a[r[0]] = r[k]; });
		return a;
	}

	// ---- the program's heatmaps (tiles.tsv's all lines) ----
	function programMaps() {
		var box = document.getElementById('program-maps'), all = D.tiles.all;
		var xc = D.summary.exchange_cycles * M.exchange_bytes_per_cycle;
		[
			{id: 'map-table', name: 'table bytes', unit: 'bytes', k: 4, limit: M.table_budget_bytes,
				limitText: 'the table budget', title: 'Exchange table bytes per tile, after row sharing'},
			{id: 'map-sram', name: 'SRAM peak', unit: 'bytes', k: 5, limit: M.available_bytes,
				limitText: 'SRAM available', title: 'SRAM per tile: tensors at their peak plus tables'},
			{id: 'map-fragments', name: 'fragments', unit: 'count', k: 3, limit: M.fragment_limit,
				limitText: 'the fragment limit', title: 'Send and receive fragments per tile, all phases'},
			{id: 'map-received', name: 'received', unit: 'bytes', k: 2, limit: xc,
				limitText: 'one port over every exchange cycle',
				title: 'Bytes received per tile over every run (every receiver counted)'}
		].forEach(function (s) { s.values = values(all, s.k); box.appendChild(heatmap(s)); });
	}

	// ---- the timeline ----
	var byPhase = {};
	function timeline() {
		var box = document.getElementById('timeline'), lane = el('div', {'class': 'lane', id: 'lane'});
		var total = D.summary.total_cycles || 1;
		function seg(kind, c, title, phase) {
			var s = el('div', {'class': 'seg ' + kind, title: title + ': ' + cycles(c)});
			s.style.flex = c + ' 0 0';
			if (phase !== undefined) { s.dataset.phase = phase; s.addEventListener('click', function () { select(phase); }); }
			lane.appendChild(s);
		}
		var tab = el('table', {'class': 'timeline', id: 'steps'});
		tab.appendChild(el('caption', {}, 'Program order: each phase (sync, replay, local copies) and compute step, per run; ' +
			'runs > 1 are a repeat body. The bars compare a phase\'s cycles (dark) with its floor (light).'));
		var hr = el('tr');
		['#', 'what', 'steps', 'runs', 'cycles per run', 'floor', 'ratio', 'critical tile', 'on the path', ''].forEach(function (h) {
			hr.appendChild(el('th', {}, h));
		});
		tab.appendChild(el('thead')).appendChild(hr);
		var body = tab.appendChild(el('tbody')), top = 1;
		D.timeline.forEach(function (e) { if (e.cycles > top) top = e.cycles; });
		D.timeline.forEach(function (e, i) {
			var tr = el('tr', {'class': e.kind}), busiest;
			var path = e.kind === 'phase' ? (e.sync_cycles + e.cycles + e.local_copy_cycles) * e.count : e.cycles * e.count;
			if (e.kind === 'phase') {
				byPhase[e.id] = e;
				busiest = busiestTile(e.id);
				var name = 'phase ' + e.id + ': ' + e.labels.join(', ');
				seg('sync', e.sync_cycles * e.count, 'sync before phase ' + e.id);
				seg('exchange', e.cycles * e.count, name + (e.count > 1 ? ' (' + e.count + ' runs)' : ''), e.id);
				if (e.local_copy_cycles) seg('copy', e.local_copy_cycles * e.count, 'local copies of phase ' + e.id);
				tr.dataset.phase = e.id;
				tr.tabIndex = 0;
				tr.addEventListener('click', function () { select(e.id); });
				tr.addEventListener('keydown', function (ev) {
					if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); select(e.id); }
				});
				[String(i), name, e.steps[0] + '–' + e.steps[1], String(e.count), cycles(e.cycles),
					e.floor_cycles === null ? '-' : commas(e.floor_cycles),
					e.floor_ratio === null ? '-' : String(e.floor_ratio),
					busiest !== null ? busiest + ' (busiest)' : (e.floor_tile === null ? '-' : e.floor_tile + ' (floor)'),
					cycles(path)].forEach(function (c) { tr.appendChild(el('td', {}, c)); });
				var bars = el('td');
				bars.appendChild(el('span', {'class': 'bar', style: 'width:' + (8 * e.cycles / top).toFixed(3) + 'em'}));
				bars.appendChild(el('br'));
				if (e.floor_cycles !== null)
					bars.appendChild(el('span', {'class': 'bar floor', style: 'width:' + (8 * e.floor_cycles / top).toFixed(3) + 'em'}));
				tr.appendChild(bars);
			} else {
				seg('compute', e.cycles * e.count, 'step ' + e.step + ': ' + e.op + ' ' + e.compute);
				[String(i), 'step ' + e.step + ': ' + e.op + ' ' + e.compute + ' on ' + commas(e.tiles) + ' tiles',
					String(e.step), String(e.count), cycles(e.cycles), '', '', e.slowest_tile + ' (slowest)',
					cycles(path), ''].forEach(function (c) { tr.appendChild(el('td', {}, c)); });
			}
			body.appendChild(tr);
		});
		if (D.other_local_copy_cycles > 0) seg('copy', D.other_local_copy_cycles, 'local copies of copy steps in no phase');
		box.appendChild(lane);
		var key = el('p', {'class': 'key note'}, 'Critical path, ' + cycles(total) + ' in all:');
		[['#bbb', 'sync'], ['#3d7fc1', 'exchange (click: the phase)'], ['#f0a030', 'local copies'], ['#5ec962', 'compute (slowest tile)']]
			.forEach(function (k) {
				key.appendChild(el('span', {style: 'background:' + k[0]}));
				key.appendChild(document.createTextNode(k[1]));
			});
		box.appendChild(key);
		var scroll = el('div', {'class': 'steps-box'});
		scroll.appendChild(tab);
		box.appendChild(scroll);
	}

	// busiestTile(id): the tile with the most busy cycles in the phase
	// (tiles.tsv version 2), or null
	function busiestTile(id) {
		var list = D.tiles.phases[id] || [], best = null, bv = -1;
		if (!D.tiles.busy) return null;
		list.forEach(function (r) { if (r[5] > bv) { bv = r[5]; best = r[0]; } });
		return best;
	}

	// ---- the selected phase ----
	function select(id) {
		var e = byPhase[id], box = document.getElementById('phase-view'), list = D.tiles.phases[id] || [];
		if (!e) return;
		Array.prototype.forEach.call(document.querySelectorAll('.selected'), function (n) { n.classList.remove('selected'); });
		Array.prototype.forEach.call(document.querySelectorAll('[data-phase="' + id + '"]'), function (n) { n.classList.add('selected'); });
		box.textContent = '';
		box.dataset.phase = id;
		box.appendChild(el('h3', {id: 'phase-title'}, 'Phase ' + id + ': ' + e.labels.join(', ')));
		box.appendChild(el('p', {}, cycles(e.cycles) + ' per run' + (e.count > 1 ? ', ' + e.count + ' runs' : '') +
			(e.floor_cycles !== null ? '; floor ' + cycles(e.floor_cycles) + ' (tile ' + e.floor_tile + '), ratio ' + e.floor_ratio : '') +
			'; ' + commas(e.transfers) + ' transfers, ' + bytesExact(e.bytes) + ' sent per run; ' + commas(list.length) + ' tiles take part.'));
		var port = e.cycles * M.exchange_bytes_per_cycle, maps = el('div', {'class': 'maps'});
		var specs = [
			{id: 'phase-received', name: 'received', unit: 'bytes', k: 2, limit: port,
				limitText: 'one port over the phase', title: 'Bytes received per tile in one run'},
			{id: 'phase-sent', name: 'sent', unit: 'bytes', k: 1, limit: port,
				limitText: 'one port over the phase', title: 'Bytes sent per tile in one run'},
			{id: 'phase-fragments', name: 'fragments', unit: 'count', k: 3, limit: M.fragment_limit,
				limitText: 'the fragment limit', title: 'Send and receive fragments per tile in the phase'}
		];
		if (D.tiles.busy)
			specs.push({id: 'phase-busy', name: 'busy', unit: 'cycles', k: 5, limit: e.cycles,
				limitText: 'the phase\'s cycles', title: 'Busy cycles per tile: its last issue or port time in the replay'});
		specs.forEach(function (s) { s.values = values(list, s.k); maps.appendChild(heatmap(s)); });
		box.appendChild(maps);
		if (!D.tiles.busy)
			box.appendChild(el('p', {'class': 'note'}, 'No busy heatmap: tiles.tsv is version ' + D.tiles.version +
				', before busy_cycles (version 2).'));
	}

	// chart(m, top): memory over steps, 0..top bytes; the SRAM available
	// as a dashed line when it is on the scale
	function chart(m, top) {
		var W = 760, H = 240, L = 70, R = 10, T = 10, B = 30, steps = m.steps, n = steps.length;
		var c = svg('svg', {'class': 'chart', id: 'memory-chart', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H});
		function X(i) { return L + (n > 1 ? i * (W - L - R) / (n - 1) : 0); }
		function Y(b) { return T + (H - T - B) * (1 - b / top); }
		function line(k, cls) {
			c.appendChild(svg('polyline', {'class': cls, points: steps.map(function (s, i) {
				return X(i).toFixed(1) + ',' + Y(s[k]).toFixed(1); }).join(' ')}));
		}
		if (M.available_bytes <= top)
			c.appendChild(svg('line', {'class': 'limit', x1: L, x2: W - R, y1: Y(M.available_bytes), y2: Y(M.available_bytes)}));
		[0, 0.5, 1].forEach(function (f) {
			var t = svg('text', {x: L - 4, y: Y(top * f) + 4, 'text-anchor': 'end'});
			t.textContent = bytes(Math.round(top * f));
			c.appendChild(t);
		});
		line('max_bytes', 'max');
		line('median_bytes', 'median');
		if (steps.length && steps[0].worst_tile_bytes !== undefined)
			line('worst_tile_bytes', 'worst');
		steps.forEach(function (s, i) {
			var d = svg('circle', {cx: X(i), cy: Y(s.max_bytes), r: 3, fill: s.step === m.worst.step ? '#000' : '#c0102a'});
			var ti = svg('title');
			ti.textContent = 'step ' + s.step + ': max ' + bytesExact(s.max_bytes) + ' on tile ' + s.max_tile +
				', median ' + bytesExact(s.median_bytes) + (s.worst_tile_bytes !== undefined ?
				', tile ' + m.worst.tile + ' (the worst) ' + bytesExact(s.worst_tile_bytes) : '');
			d.appendChild(ti);
			c.appendChild(d);
			if (i === n - 1 || i % Math.ceil(n / 16) === 0) {
				var t = svg('text', {x: X(i), y: H - B + 14, 'text-anchor': 'middle'});
				t.textContent = s.step;
				c.appendChild(t);
			}
		});
		var xl = svg('text', {x: (L + W) / 2, y: H - 4, 'text-anchor': 'middle'});
		xl.textContent = 'program step';
		c.appendChild(xl);
		return c;
	}

	// ---- memory over program steps ----
	function memory() {
		var box = document.getElementById('memory'), m = D.memory;
		if (!m) {
			box.appendChild(el('p', {'class': 'note'}, 'This capture has no memory object: no memory over steps.'));
			return;
		}
		var most = 1;
		m.steps.forEach(function (s) { if (s.max_bytes > most) most = s.max_bytes; });
		var p = el('p', {'class': 'note'}), lim = el('input', {type: 'checkbox', id: 'memory-limit'});
		var lab = el('label');
		lab.appendChild(lim);
		lab.appendChild(document.createTextNode(' scale to the SRAM available (' + bytesExact(M.available_bytes) +
			') rather than the largest step (' + bytesExact(most) + ')'));
		p.appendChild(lab);
		box.appendChild(p);
		var holder = el('div');
		box.appendChild(holder);
		function draw() {
			holder.textContent = '';
			holder.appendChild(chart(m, lim.checked ? Math.max(M.available_bytes, most) : most * 1.1));
		}
		lim.addEventListener('change', draw);
		draw();
		var key = el('p', {'class': 'key note'}, 'Tensor bytes live per step:');
		[['#c0102a', 'the most on any tile (its tile in the tooltip)'], ['#3d7fc1', 'the median tile'],
			['#e69138', 'the worst tile (the most at its peak), step by step'],
			['#000', 'the worst tile\'s peak step'], ['#222', 'SRAM available (dashed, when on the scale)']].forEach(function (k) {
			key.appendChild(el('span', {style: 'background:' + k[0]}));
			key.appendChild(document.createTextNode(k[1]));
		});
		box.appendChild(key);
		var w = m.worst, tens = 0;
		w.tensors.forEach(function (t) { tens += t.bytes; });
		if (typeof w.tensor_bytes === 'number') tens = w.tensor_bytes;
		box.appendChild(el('h3', {}, 'The worst tile: tile ' + w.tile + ' at step ' + w.step));
		box.appendChild(el('p', {id: 'worst-stack-text'}, 'tensors ' + bytesExact(tens) + ' + tables ' + bytesExact(w.table_bytes) +
			' = ' + bytesExact(tens + w.table_bytes) + ' of ' + bytesExact(M.available_bytes) + ' available' +
			(tens + w.table_bytes > M.available_bytes ? ': OVER' : '')));
		var st = el('div', {'class': 'stack'}), scale = Math.max(M.available_bytes, tens + w.table_bytes);
		st.appendChild(el('div', {style: 'background:#3d7fc1;width:' + (100 * tens / scale).toFixed(2) + '%', title: 'tensors ' + bytesExact(tens)}));
		st.appendChild(el('div', {style: 'background:#f0a030;width:' + (100 * w.table_bytes / scale).toFixed(2) + '%', title: 'tables ' + bytesExact(w.table_bytes)}));
		box.appendChild(st);
		var sk = el('p', {'class': 'key note'});
		[['#3d7fc1', 'tensors'], ['#f0a030', 'tables'], ['#fff', 'free, to the SRAM available']].forEach(function (k) {
			sk.appendChild(el('span', {style: 'background:' + k[0] + ';border:1px solid #999'}));
			sk.appendChild(document.createTextNode(k[1]));
		});
		box.appendChild(sk);
		var tab = el('table', {id: 'worst-tensors'});
		tab.appendChild(el('caption', {}, 'Its live tensors, largest first'));
		var hr = el('tr');
		['tensor', 'placement', 'bytes', 'share'].forEach(function (h) { hr.appendChild(el('th', {}, h)); });
		tab.appendChild(el('thead')).appendChild(hr);
		var body = tab.appendChild(el('tbody'));
		w.tensors.slice().sort(function (a, b) { return b.bytes - a.bytes || (a.tensor < b.tensor ? -1 : 1); }).forEach(function (t) {
			var tr = el('tr');
			tr.appendChild(el('td', {}, t.tensor));
			tr.appendChild(el('td', {}, t.placement));
			tr.appendChild(el('td', {'class': 'n'}, bytesExact(t.bytes)));
			tr.appendChild(el('td', {'class': 'n'}, tens ? dec(100 * t.bytes / tens, 1) + '%' : '-'));
			body.appendChild(tr);
		});
		box.appendChild(tab);
	}

	// ---- the movement graph: fit, and search its text ----
	function flow() {
		var box = document.getElementById('flow'), q = document.getElementById('flow-search'),
			fit = document.getElementById('flow-fit'), out = document.getElementById('flow-hits');
		if (!box) return;
		fit.addEventListener('change', function () { box.classList.toggle('fit', fit.checked); });
		q.addEventListener('input', function () {
			var s = q.value.toLowerCase(), n = 0, first = null;
			Array.prototype.forEach.call(box.querySelectorAll('g.node, g.edge'), function (g) {
				var hit = s !== '' && g.textContent.toLowerCase().indexOf(s) >= 0;
				g.classList.toggle('hit', hit);
				if (hit) { n++; if (!first) first = g; }
			});
			out.textContent = s === '' ? '' : n + ' match' + (n === 1 ? '' : 'es');
			if (first) first.scrollIntoView({block: 'center', inline: 'center'});
		});
	}

	// ---- the trace's tile lanes (<script id="amp-trace">, share/report/trace.jq) ----
	function lanes() {
		var T = JSON.parse(document.getElementById('amp-trace').textContent), box = document.getElementById('lanes');
		if (!T || !T.tiles.length) {
			box.appendChild(el('p', {'class': 'note'}, 'No trace: make trace MODEL=... writes one, and make report reads it.'));
			return;
		}
		var colour = {compute: '#6aa84f', sync: '#999999', exchange: '#3d7fc1', local: '#e69138'};
		var W = 960, H = 14, gap = 3, left = 70, n = T.tiles.length, zoom = 1;
		var names = el('canvas', {width: left, height: (n + 1) * (H + gap)});
		var cv = el('canvas', {id: 'lanes-canvas', height: (n + 1) * (H + gap)});
		var scroll = el('div', {'class': 'lanes-scroll'});
		scroll.style.overflowX = 'auto';
		scroll.style.display = 'inline-block';
		scroll.style.maxWidth = W + 'px';
		scroll.style.verticalAlign = 'top';
		var ng = names.getContext('2d');
		ng.font = '11px sans-serif';
		ng.fillText('critical path', 2, H - 3);
		T.tiles.forEach(function (t, i) { ng.fillText('tile ' + t, 2, (i + 1) * (H + gap) + H - 3); });
		function scale() { return T.total > 0 ? W * zoom / T.total : 0; }
		function draw() {
			cv.width = Math.round(W * zoom);
			var g = cv.getContext('2d'), sc = scale(), x0 = 0;
			D.timeline.forEach(function (e) {      // the critical path: every run in order
				var span = e.kind === 'phase' ? [['sync', e.sync_cycles], ['exchange', e.cycles], ['local', e.local_copy_cycles]]
					: [['compute', e.cycles]];
				for (var r = 0; r < e.count; r++)
					span.forEach(function (s) {
						var w = (M.clock_hz ? s[1] * 1e6 / M.clock_hz : s[1]) * sc;
						g.fillStyle = colour[s[0]];
						g.fillRect(x0, 0, Math.max(w, 0.5), H);
						x0 += w;
					});
			});
			T.lanes.forEach(function (lane, i) {
				var y = (i + 1) * (H + gap);
				lane.forEach(function (s) {
					g.fillStyle = colour[T.cats[s[2]]];
					g.fillRect(s[0] * sc, y, Math.max(s[1] * sc, 0.5), H);
				});
			});
			cv.dataset.zoom = zoom;
		}
		cv.addEventListener('mousemove', function (ev) {
			var r = cv.getBoundingClientRect(), sc = scale(), i = Math.floor((ev.clientY - r.top) / (H + gap)) - 1;
			var lane = T.lanes[i], t = (ev.clientX - r.left) / sc, hit = null;
			for (var k = 0; lane && k < lane.length && !hit; k++)
				if (lane[k][0] <= t && t <= lane[k][0] + lane[k][1] + 0.5 / sc) hit = lane[k];
			if (!hit) { tip.style.display = 'none'; return; }
			tip.textContent = 'tile ' + T.tiles[i] + ': ' + T.names[hit[3]] + ', ' + dec(hit[1], 3) + ' at ' + dec(hit[0], 3) +
				(M.clock_hz ? ' µs' : ' cycles');
			tip.dataset.tile = T.tiles[i];
			tip.dataset.map = 'lanes';
			tip.style.display = 'block';
			tip.style.left = (ev.clientX + 12) + 'px';
			tip.style.top = (ev.clientY + 12) + 'px';
		});
		cv.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
		var bar = el('p', {'class': 'note'});
		[['zoom-in', 'zoom in', 2], ['zoom-out', 'zoom out', 0.5], ['zoom-fit', 'fit', 0]].forEach(function (b) {
			var btn = el('button', {id: 'lanes-' + b[0], type: 'button'}, b[1]);
			btn.addEventListener('click', function () {
				var mid = (scroll.scrollLeft + scroll.clientWidth / 2) / (W * zoom);
				zoom = b[2] ? Math.min(Math.max(zoom * b[2], 1), 4096) : 1;
				draw();
				scroll.scrollLeft = mid * W * zoom - scroll.clientWidth / 2;
			});
			bar.appendChild(btn);
			bar.appendChild(document.createTextNode(' '));
		});
		bar.appendChild(document.createTextNode('(or scroll sideways when zoomed)'));
		box.appendChild(bar);
		box.appendChild(names);
		scroll.appendChild(cv);
		box.appendChild(scroll);
		draw();
		var key = el('p', {'class': 'key note'});
		['compute', 'sync', 'exchange', 'local'].forEach(function (c) {
			var sw = el('span');
			sw.style.background = colour[c];
			key.appendChild(sw);
			key.appendChild(document.createTextNode(c === 'local' ? 'local copies ' : c + ' '));
		});
		key.appendChild(document.createTextNode('· ' + n + ' tiles, ' + T.time +
			(T.dropped ? '; ' + T.dropped + ' more tiles in the trace left out (too many slices)' : '')));
		box.appendChild(key);
	}

	timeline();
	lanes();
	programMaps();
	memory();
	flow();
	var first = D.timeline.filter(function (e) { return e.kind === 'phase'; })[0];
	if (first) select(first.id);
	document.body.dataset.ready = 'yes';
})();
