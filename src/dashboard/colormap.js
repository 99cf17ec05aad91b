/* posenc dashboard: colour maps, the same tables as the PNG heatmaps (src/tensor/colormap.c).
 *
 * viridis is matplotlib's published 256-entry ListedColormap (van der Walt & Smith, 2015); RdBu is
 * ColorBrewer's 11-class RdBu interpolated linearly in sRGB as matplotlib does, 251 entries so the
 * centre #f7f7f7 is entry 125 exactly. The hex strings below are generated from colormap.c's
 * tables (6 hex digits per colour), not typed by hand.
 *
 * A value's colour follows matplotlib and the PNG writer: t = (v - lo) / (hi - lo), entry
 * min(floor(t * n), n - 1); viridis spans [min, max], RdBu is centred on 0 ([-m, m], m = max |v|).
 * NaN, infinities and masked entries (the dtype's lowest finite value) get BAD and stay out of the
 * range. */

/* Unpack 'rrggbb…' into a Uint8Array of r, g, b triples. */
function unpack(hex) {
	const out = new Uint8Array(hex.length / 2);
	for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.substr(2 * i, 2), 16);
	return out;
}

export const BAD = [128, 128, 128];

export const COLORMAPS = {
	viridis: { name: 'viridis', diverging: false, rgb: unpack(
	'44015444025645045745055946075a46085c460a5d460b5e470d60470e61471063471164' +
	'47136548146748166848176948186a481a6c481b6d481c6e481d6f481f70482071482173' +
	'482374482475482576482677482878482979472a7a472c7a472d7b472e7c472f7d46307e' +
	'46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85' +
	'4240864241864142874144874045884046883f47883f48893e49893e4a893e4c8a3d4d8a' +
	'3d4e8a3c4f8a3c508b3b518b3b528b3a538b3a548c39558c39568c38588c38598c375a8c' +
	'375b8d365c8d365d8d355e8d355f8d34608d34618d33628d33638d32648e32658e31668e' +
	'31678e31688e30698e306a8e2f6b8e2f6c8e2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e' +
	'2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e' +
	'277e8e277f8e27808e26818e26828e26828e25838e25848e25858e24868e24878e23888e' +
	'23898e238a8d228b8d228c8d228d8d218e8d218f8d21908d21918c20928c20928c20938c' +
	'1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88' +
	'1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa83' +
	'25ab8225ac8226ad8127ad8128ae8029af7f2ab07f2cb17e2db27d2eb37c2fb47c31b57b' +
	'32b67a34b67935b77937b87838b9773aba763bbb753dbc743fbc7340bd7242be7144bf70' +
	'46c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc863' +
	'5ec96260ca6063cb5f65cb5e67cc5c69cd5b6ccd5a6ece5870cf5773d05675d05477d153' +
	'7ad1517cd2507fd34e81d34d84d44b86d54989d5488bd6468ed64590d74393d74195d840' +
	'98d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32addc30b0dd2fb2dd2db5de2b' +
	'b8de29bade28bddf26c0df25c2df23c5e021c8e020cae11fcde11dd0e11cd2e21bd5e21a' +
	'd8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61e' +
	'f6e620f8e621fbe723fde725') },
	RdBu: { name: 'RdBu', diverging: true, rgb: unpack(
	'67001f6a011f6d02207003207304217605217906227c07227f0823820923850a24880b24' +
	'8b0c258e0c25910d26940e26970f279a10279d1128a01228a31329a61429a9152aac162a' +
	'af172bb2182bb31b2cb51e2eb6212fb82430b92632bb2933bc2c35be2f36bf3237c03539' +
	'c2383ac33b3bc53d3dc6403ec8433fc94641ca4942cc4c43cd4f45cf5246d05448d25749' +
	'd35a4ad55d4cd6604dd7634fd86651da6853db6b55dc6e58dd715ade735ce0765ee17960' +
	'e27c62e37e64e48166e68469e7876be8896de98c6fea8f71ec9273ed9475ee9777ef9a7a' +
	'f09d7cf29f7ef3a280f4a582f4a785f5a988f5ab8af5ae8df6b090f6b293f7b495f7b698' +
	'f7b89bf8bb9ef8bda0f8bfa3f9c1a6f9c3a9f9c5abfac8aefacab1faccb4fbceb6fbd0b9' +
	'fcd2bcfcd5bffcd7c1fdd9c4fddbc7fddcc9fdddcbfcdecdfcdfcffce1d1fce2d3fbe3d4' +
	'fbe4d6fbe5d8fbe6dafae7dcfae8defaeae0faebe2f9ece4f9ede6f9eee8f9efeaf8f0eb' +
	'f8f1edf8f3eff8f4f1f7f5f3f7f6f5f7f7f7f5f6f7f4f6f6f2f5f6f1f4f6eff3f6eef3f5' +
	'ecf2f5ebf1f5e9f1f4e8f0f4e6eff4e5eef4e3eef3e2edf3e0ecf3dfebf3ddebf2dceaf2' +
	'dae9f2d9e9f1d7e8f1d6e7f1d4e6f1d3e6f0d1e5f0cee4efcce2efc9e1eec7e0edc4dfec' +
	'c2ddecbfdcebbddbeabad9eab8d8e9b5d7e8b3d6e7b0d4e7aed3e6abd2e5a9d1e4a6cfe4' +
	'a4cee3a1cde29fcbe29ccae19ac9e097c8df95c6df92c5de8fc3dd8cc1dc89bfdb85bdda' +
	'82bbd97fb9d87cb7d679b5d576b3d472b1d36fafd26cadd169abd066a9cf63a7ce5fa5cd' +
	'5ca3cc59a1cb569fc9539dc8509bc74c99c64997c54695c44393c34291c2408fc13f8ec0' +
	'3e8cbf3c8abe3b88bd3986bd3885bc3783bb3581ba347fb9337db8317cb7307ab62f78b5' +
	'2d76b42c74b32b73b22971b2286fb1266db0256baf246aae2268ad2166ac2064a91f62a6' +
	'1e60a31d5da01b5b9d1a599a19579718559417539116508e154e8b144c88124a85114882' +
	'10467f0f437c0e41790d3f760c3d730b3b7009396d08366a073467063264053061') },
};

/* Lowest finite values: the contract writes masked entries (causal masks) as these. */
const MASKED = new Set([-3.4028234663852886e38, -1.7976931348623157e308, -65504, -2147483648]);

export function isBad(v) {
	return !Number.isFinite(v) || MASKED.has(v);
}

/* The colour range of data for a colour map: {lo, hi} over the finite, unmasked values. */
export function valueRange(data, cmap) {
	let lo = Infinity, hi = -Infinity;
	for (let i = 0; i < data.length; i++) {
		const v = data[i];
		if (isBad(v)) continue;
		if (v < lo) lo = v;
		if (v > hi) hi = v;
	}
	if (lo > hi) { lo = 0; hi = 0; }
	if (cmap.diverging) {
		const m = Math.max(Math.abs(lo), Math.abs(hi));
		return { lo: -m, hi: m };
	}
	return { lo, hi };
}

/* Index into the cmap's table for v in [lo, hi]; a constant table gets t = 0 (or 0.5 diverging). */
export function colorIndex(cmap, v, lo, hi) {
	const n = cmap.rgb.length / 3;
	let t = hi > lo ? (v - lo) / (hi - lo) : (cmap.diverging ? 0.5 : 0);
	if (!(t > 0)) return 0;
	if (t >= 1) return n - 1;
	return Math.min(Math.floor(t * n), n - 1);
}

/* [r, g, b] of v. */
export function colorOf(cmap, v, lo, hi) {
	if (isBad(v)) return BAD;
	const i = 3 * colorIndex(cmap, v, lo, hi);
	return [cmap.rgb[i], cmap.rgb[i + 1], cmap.rgb[i + 2]];
}
