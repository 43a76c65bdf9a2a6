//! The compute pool hands out candle's chunks, so a product is the same bit for bit on our
//! pool and on candle's barrier pool. A test binary of its own: the switch between the pools
//! is process-wide, and the pool's thread count is fixed at its first use.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use onebrain_kernels::pool::use_candle_pool;
use onebrain_kernels::{Kernel, TiledMatrix};

#[test]
fn products_are_the_same_on_our_pool_and_on_candles() {
    // Three threads, whatever the machine has, so that chunks land on workers in both pools.
    std::env::set_var("RAYON_NUM_THREADS", "3");
    let Some(kernel) = Kernel::best() else {
        eprintln!("skipped: this CPU runs no tiled kernel (neither AVX-512 VNNI nor AVX2)");
        return;
    };
    for (dtype, rows, cols) in [(GgmlDType::Q8_0, 256, 96), (GgmlDType::Q4K, 128, 512)] {
        let w: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37).sin() * (1.0 + (i % 7) as f32)).collect();
        let w = Tensor::from_vec(w, (rows, cols), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&w, dtype).unwrap();
        let tiles = TiledMatrix::from_qtensor_on(&q, kernel).unwrap().expect("the matrix tiles");
        // One row (decode) and many (prefill, the update), so both of the kernel's ways of
        // splitting the work are on the pool.
        for m in [1, 4, 67] {
            let x: Vec<f32> = (0..m * cols).map(|i| (i as f32 * 0.11).cos() * 2.0).collect();
            let x = Tensor::from_vec(x, (1, m, cols), &Device::Cpu).unwrap();
            let product = |candle: bool| -> Vec<u32> {
                use_candle_pool(candle);
                let out = tiles.matmul(&x).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
                out.into_iter().map(f32::to_bits).collect()
            };
            let (ours, candles) = (product(false), product(true));
            assert_eq!(ours, candles, "{dtype:?}, {m} rows: the pools disagree");
        }
    }
    use_candle_pool(false);
}
