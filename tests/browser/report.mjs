// node tests/browser/report.mjs PAGE TILES SCREENSHOT [QUERY...]: drives
// Debian's chromium (playwright-core, no browser download) over a
// report.html. It waits for report.js to draw, searches the movement
// graph for each QUERY, clicks the second phase in the timeline's lane,
// then the last phase in its table, hovers a tile of that phase's
// received heatmap that received nothing, then one that received the
// most, and prints what the page showed, one fact a line:
//   search QUERY N TEXT: the nodes and edges matched, and what it says
//   lane ID SHOWN: the phase clicked in the lane, and the phase shown
//   phase ID of N (clicked ID): the phase view's phase
//   hover TILE VALUE MAP DISPLAY TEXT: the tooltip's tile, raw value,
//     heatmap, CSS display and text
//   expected TILE VALUE: tiles.tsv's received_bytes of that tile there
//   requests N, errors N: requests beyond the file, and script errors
// then writes a screenshot of the page, the tooltip on the last tile
// hovered, to SCREENSHOT. tests/bats/report.bats checks the lines.
// Exit 1 on any failure, with the reason on stderr.
import { chromium } from 'playwright-core';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [page_, tiles, shot, ...queries] = process.argv.slice(2);
if (!shot) {
	console.error('usage: node report.mjs PAGE TILES SCREENSHOT [QUERY...]');
	process.exit(2);
}

// received_bytes of every tile in PHASE, from tiles.tsv's phase lines
function received(phase) {
	const got = new Map();
	for (const line of readFileSync(tiles, 'utf8').split('\n').slice(2)) {
		const f = line.split('\t');
		if (f.length >= 7 && f[1] === String(phase)) got.set(Number(f[0]), Number(f[3]));
	}
	return got;
}

const profile = mkdtempSync(join(tmpdir(), 'amp-chromium-'));
let browser;
try {
	browser = await chromium.launchPersistentContext(profile, {
		executablePath: '/usr/bin/chromium',
		headless: true,
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
			'--disable-background-networking', '--disable-component-update', '--disable-sync'],
		viewport: { width: 1400, height: 1000 },
	});
	const page = browser.pages()[0] || await browser.newPage();
	const requests = [];
	page.on('request', r => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) requests.push(r.url()); });
	const errors = [];
	page.on('pageerror', e => errors.push(String(e)));
	await page.goto(pathToFileURL(resolve(page_)).href);
	await page.waitForSelector('body[data-ready="yes"]', { timeout: 20000 });
	for (const q of queries) {
		await page.locator('#flow-search').fill(q);
		const hits = await page.locator('#flow g.hit').count();
		console.log(`search ${q} ${hits} ${await page.locator('#flow-hits').textContent()}`);
	}
	await page.locator('#flow-search').fill('');

	// the lane: a click on the second phase's exchange segment selects it
	const segs = page.locator('#lane .seg.exchange');
	if (await segs.count() > 1) {
		const seg = segs.nth(1);
		await seg.click({ force: true });
		console.log(`lane ${await seg.getAttribute('data-phase')} ${await page.locator('#phase-view').getAttribute('data-phase')}`);
	}
	const phases = page.locator('#steps tr.phase');
	const n = await phases.count();
	if (n < 1) throw new Error('the timeline has no phase');
	const row = phases.nth(n - 1);
	const id = await row.getAttribute('data-phase');
	await row.click();
	const shown = await page.locator('#phase-view').getAttribute('data-phase');
	console.log(`phase ${shown} of ${n} (clicked ${id})`);

	const want = received(id);
	let best = -1, bestTile = -1, none = -1;
	for (const [t, v] of want) if (v > best) { best = v; bestTile = t; }
	const tilesN = await page.evaluate(() => JSON.parse(document.getElementById('amp-data').textContent).machine.tiles);
	for (let t = 0; t < tilesN; t++) if (!want.has(t)) { none = t; break; }

	// the trace's tile lanes: zoom in twice, then hover the first tile's first slice
	const lanes = page.locator('#lanes-canvas');
	await lanes.scrollIntoViewIfNeeded();
	await page.locator('#lanes-zoom-in').click();
	await page.locator('#lanes-zoom-in').click();
	console.log(`zoom ${await lanes.getAttribute('data-zoom')} ${await lanes.getAttribute('width')}`);
	const at = await page.evaluate(() => {
		const T = JSON.parse(document.getElementById('amp-trace').textContent), cv = document.getElementById('lanes-canvas');
		const s = T.lanes[0][0];
		return [T.tiles[0], (s[0] + s[1] / 2) * cv.width / T.total, T.names[s[3]]];
	});
	await page.locator('.lanes-scroll').evaluate(e => { e.scrollLeft = 0; });
	await lanes.hover({ position: { x: at[1], y: 14 + 3 + 7 } });
	console.log(`lanehover ${at[0]} ${at[2]} | ${await page.locator('#tip').textContent()}`);

	const canvas = page.locator('#phase-received canvas');
	await canvas.scrollIntoViewIfNeeded();
	const cols = Number(await canvas.getAttribute('data-cols'));
	const cell = Number(await canvas.getAttribute('data-cell'));
	for (const t of [none, bestTile]) {
		if (t < 0) continue;
		await canvas.hover({ position: { x: (t % cols) * cell + cell / 2, y: Math.floor(t / cols) * cell + cell / 2 } });
		const tip = page.locator('#tip');
		const got = await tip.evaluate(e => [e.dataset.tile, e.dataset.value, e.dataset.map, e.textContent,
			getComputedStyle(e).display]);
		console.log(`hover ${got[0]} ${got[1]} ${got[2]} ${got[4]} ${got[3]}`);
		console.log(`expected ${t} ${want.has(t) ? want.get(t) : 0}`);
	}
	await page.screenshot({ path: shot, fullPage: false });
	console.log(`requests ${requests.length}${requests.length ? ': ' + requests.join(' ') : ''}`);
	console.log(`errors ${errors.length}${errors.length ? ': ' + errors.join(' | ') : ''}`);
} catch (e) {
	console.error(`report.mjs: ${e.message}`);
	process.exitCode = 1;
} finally {
	if (browser) await browser.close();
	rmSync(profile, { recursive: true, force: true });
}
