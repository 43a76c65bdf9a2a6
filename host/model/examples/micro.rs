use candle_core::{quantized::{gguf_file, QMatMul}, Device, Module, Tensor};
use std::time::Instant;
fn main() -> anyhow::Result<()> {
    let path = onebrain_model::resolve_model(std::path::Path::new(onebrain_model::TEST_MODEL_FILE))?;
    let mut f = std::fs::File::open(path.path())?;
    let c = gguf_file::Content::read(&mut f)?;
    for name in ["blk.0.ffn_up.weight"] {
        let q = c.tensor(&mut f, name, &Device::Cpu)?;
        let (n, k) = q.shape().dims2()?;
        println!("{name} {:?} {n}x{k}", q.dtype());
        let deq = q.dequantize(&Device::Cpu)?;
        for dt in [q.dtype(), candle_core::quantized::GgmlDType::Q8_0, candle_core::quantized::GgmlDType::Q4_0] {
        println!(" as {dt:?}");
        let mm = QMatMul::from_qtensor(candle_core::quantized::QTensor::quantize(&deq, dt)?)?;
        for m in [1usize, 64, 512] {
            let x = Tensor::randn(0f32, 1.0, (1, m, k), &Device::Cpu)?;
            let _ = mm.forward(&x)?;
            let t = Instant::now();
            let reps = if m == 1 { 50 } else { 5 };
            for _ in 0..reps { let _ = mm.forward(&x)?; }
            let s = t.elapsed().as_secs_f64() / reps as f64;
            println!("  m={m}: {:.3} ms, {:.2} GFLOP/s", s * 1e3, 2.0 * (m * n * k) as f64 / s / 1e9);
        }}
    }
    let w = Tensor::randn(0f32, 1.0, (1536, 576), &Device::Cpu)?;
    let x = Tensor::randn(0f32, 1.0, (512, 576), &Device::Cpu)?;
    let t = Instant::now();
    for _ in 0..5 { let _ = x.matmul(&w.t()?)?; }
    let s = t.elapsed().as_secs_f64() / 5.0;
    println!("f32 512x576x1536: {:.3} ms {:.2} GFLOP/s", s*1e3, 2.0*512.0*576.0*1536.0/s/1e9);
    println!("threads {}", candle_core::utils::get_num_threads());
    Ok(())
}
